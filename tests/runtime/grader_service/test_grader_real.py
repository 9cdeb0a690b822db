"""The service with the real evaluator (`python -m a2c.runtime.grader_service.evaluate_one`): the
exact_match grader on the tiny built-in model, five held-out records."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from a2c.contracts.events import read_events, verify_events
from a2c.runtime.grader_service import compute_baseline_for_run
from a2c.runtime.grader_service import start_grader_service as start_service

pytestmark = pytest.mark.slow

GRADER = {"kind": "exact_match",
          "params": {"pattern": "####\\s*(-?[\\d,.]+)", "fallback": "none", "normalize": "number"},
          "inference": {"max_new_tokens": 8, "batch_size": 8, "temperature": 0.0}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A private copy of the tiny built-in (the shared cache may be rebuilt by other runs)."""
    models = pytest.importorskip("a2c.runtime.models")
    pytest.importorskip("a2c.runtime.graders")
    target = tmp_path_factory.mktemp("models") / "tiny"
    shutil.copytree(models.prepare_builtin("tiny"), target)
    return target


def test_real_evaluations_duplicates_invalid_and_baseline_cache(make_run, tiny):
    started = time.monotonic()
    run = make_run(evaluator=None, grader=GRADER, base_model=str(tiny), engine="transformers",
                   eval_timeout_s=300)
    heldout = run / "grader" / "heldout.jsonl"
    heldout.write_text("".join(json.dumps({"id": str(i), "prompt": f"What is {i} plus {i}?",
                                           "answer": str(2 * i)}) + "\n" for i in range(5)))
    out = run / "workspace" / "output"
    shutil.copytree(tiny, out / "copy")
    shutil.copytree(tiny, out / "broken")
    (out / "broken" / "config.json").write_text("{ this is not json")
    handle = start_service(run)
    try:
        client = handle.client()
        ids = [client.submit(p)["id"] for p in ("output/copy", "output/broken", "output/copy")]
        assert handle.wait_idle(240) and handle.alive()
        copy, broken, dup = (client.status(i) for i in ids)
        assert copy["status"] == "scored" and copy["valid"] and 0 <= copy["score"] <= 100
        assert copy["backend"] == "transformers"
        full = json.loads((run / "results" / f"{ids[0]}.json").read_text())
        assert full["n_items"] == 5 and len(full["items"]) == 5 and full["grader"] == "exact_match"
        assert broken["status"] == "invalid" and broken["score"] is None and broken["error"]
        assert dup["duplicate_of"] == ids[0] and dup["score"] == copy["score"]
    finally:
        handle.stop(30)
    assert verify_events(run / "events.jsonl").ok
    # The baseline, computed for real once, then from the cache for another run.
    first = compute_baseline_for_run(run)
    assert first.valid and not first.cached and first.score == copy["score"]
    run2 = make_run(evaluator=None, grader=GRADER, base_model=str(tiny))
    shutil.copy(heldout, run2 / "grader" / "heldout.jsonl")
    second = compute_baseline_for_run(run2)
    assert second.key == first.key, (first, second)
    assert second.cached and second.score == first.score, (first, second)
    types = [e["type"] for e in read_events(run2 / "events.jsonl")]
    assert types == ["baseline_scored"]
    assert time.monotonic() - started < 180
