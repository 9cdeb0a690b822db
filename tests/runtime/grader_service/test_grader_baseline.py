"""The baseline: scored once per (task, base model, grader, held-out set) and cached; a failed
baseline is never cached and never reported as 0."""

from __future__ import annotations

import json

import pytest
from service_helpers import FAKE_EVALUATOR, make_model

from a2c.contracts.events import read_events
from a2c.runtime.grader_service import compute_baseline, compute_baseline_for_run
from a2c.runtime.grader_service import start_grader_service as start_service

GRADER = {"kind": "exact_match", "params": {"pattern": "####\\s*(-?[\\d,.]+)"}}


@pytest.fixture
def eval_log(tmp_path, monkeypatch):
    log = tmp_path / "evals.log"
    monkeypatch.setenv("FAKE_EVAL_LOG", str(log))
    return lambda: log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def heldout(tmp_path):
    path = tmp_path / "heldout.jsonl"
    path.write_text('{"id": "1", "prompt": "1+1", "answer": "2"}\n')
    return path


def baseline(base, heldout, cache, **kw):
    args = dict(task_id="unit", base_model=base, grader_cfg=GRADER, heldout=heldout,
                engine="transformers", cache_dir=cache, timeout_s=30, evaluator=FAKE_EVALUATOR)
    args.update(kw)
    return compute_baseline(**args)


def test_baseline_cache_hit(tmp_path, heldout, eval_log, monkeypatch):
    import tempfile
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    base = make_model(tmp_path / "base", SCORE=12)
    cache = tmp_path / "cache"
    first = baseline(base, heldout, cache)
    assert first.valid and first.score == 12.0 and not first.cached
    assert first.key_parts["grader_version"] and first.key_parts["task_id"] == "unit"
    assert (cache / f"{first.key}.json").is_file()
    second = baseline(base, heldout, cache)
    assert second.cached and second.score == 12.0 and second.key == first.key
    assert len(eval_log()) == 1
    # Each part of the key matters: another task, held-out set, grader config or base model.
    other_heldout = tmp_path / "other.jsonl"
    other_heldout.write_text('{"id": "2", "prompt": "2+2", "answer": "4"}\n')
    assert not baseline(base, other_heldout, cache).cached
    assert not baseline(base, heldout, cache, task_id="other").cached
    assert not baseline(base, heldout, cache,
                        grader_cfg={**GRADER, "inference": {"max_new_tokens": 7}}).cached
    (base / "model.safetensors").write_text("retrained")
    assert not baseline(base, heldout, cache).cached
    assert len(eval_log()) == 5
    assert not list(scratch_root.iterdir())   # no run: the scratch folders went with it


def test_one_baseline_wherever_the_data_lies(tmp_path, heldout, eval_log):
    """A run (its RUN/grader copy) and `a2c check` (its own bundle copy) score the same held-out
    items from two folders: `env.data_root` is a place, not part of the key; the environment's
    other settings are."""
    base = make_model(tmp_path / "base", SCORE=12)
    cache = tmp_path / "cache"
    rollout = {"kind": "rollout", "env": {"kind": "textworld", "max_steps": 4}}
    first = baseline(base, heldout, cache,
                     grader_cfg={**rollout, "env": {**rollout["env"], "data_root": "/run/a"}})
    again = baseline(base, heldout, cache,
                     grader_cfg={**rollout, "env": {**rollout["env"], "data_root": "/check/b"}})
    assert again.cached and again.key == first.key
    other = baseline(base, heldout, cache,
                     grader_cfg={**rollout, "env": {**rollout["env"], "max_steps": 8}})
    assert not other.cached
    assert len(eval_log()) == 2


def test_failed_baseline_is_not_cached_and_not_zero(tmp_path, heldout, eval_log):
    base = make_model(tmp_path / "base", CRASH=1)
    cache = tmp_path / "cache"
    run = tmp_path / "run"
    run.mkdir()
    first = baseline(base, heldout, cache, run_dir=run)
    assert first.valid is False and first.score is None and first.ci95 is None
    assert "Unable to load weights" in first.error
    assert not list(cache.glob("*.json"))
    stored = json.loads((run / "results" / "baseline.json").read_text())
    assert stored["valid"] is False and stored["score"] is None
    event = [e for e in read_events(run / "events.jsonl") if e["type"] == "baseline_scored"][-1]
    assert event["data"]["valid"] is False and event["data"]["score"] is None
    again = baseline(base, heldout, cache)
    assert again.valid is False and not again.cached
    assert len(eval_log()) == 2                    # evaluated again: nothing was cached
    # An invalid grader result (valid: false) is not cached either.
    (base / "CRASH").unlink()
    (base / "INVALID").write_text("1")
    assert baseline(base, heldout, cache).valid is False
    assert not list(cache.glob("*.json"))
    (base / "INVALID").unlink()
    assert baseline(base, heldout, cache).valid is True
    assert len(list(cache.glob("*.json"))) == 1


def test_baseline_for_run_and_copy_of_base(make_run, tmp_path, eval_log):
    base = make_model(tmp_path / "base", content="base weights", SCORE=9)
    run = make_run(base_model=str(base), baseline=True)
    handle = start_service(run)
    try:
        client = handle.client()
        # The agent copies the base model into output/ and submits it.
        copy = make_model(run / "workspace" / "output" / "copy", content="base weights", SCORE=9)
        assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in base.iterdir())
        sid = client.submit("output/copy")["id"]
        assert handle.wait_idle(30)
        sub = client.status(sid)
        assert sub["score"] == 9.0 and sub["duplicate_of"] == "baseline" and sub["copy_of_base"]
        assert len(eval_log()) == 1              # the baseline only
        base_json = json.loads((run / "results" / "baseline.json").read_text())
        assert base_json["valid"] and base_json["score"] == 9.0
    finally:
        handle.kill()
    # A second run of the same task reuses the cache.
    run2 = make_run(base_model=str(base))
    again = compute_baseline_for_run(run2)
    assert again.cached and again.score == 9.0
    assert len(eval_log()) == 1
    events = [e for e in read_events(run2 / "events.jsonl") if e["type"] == "baseline_scored"]
    assert events[0]["data"]["cached"] is True and events[0]["data"]["score"] == 9.0


def test_concurrent_runs_evaluate_the_baseline_once(tmp_path, heldout, eval_log):
    import threading

    base = make_model(tmp_path / "base", SCORE=21, SLEEP=1)
    cache = tmp_path / "cache"
    results = []
    threads = [threading.Thread(target=lambda: results.append(baseline(base, heldout, cache)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r.score for r in results] == [21.0] * 3
    assert sorted(r.cached for r in results) == [False, True, True]
    assert len(eval_log()) == 1
