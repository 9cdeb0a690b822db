"""The final split: held-out items parted once by seed, scored at the end for the counted
submission and the baseline, and the selection gap an agent that keeps the best of many noisy
submissions shows (positive: the feedback score overstates its model)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from a2c.contracts.events import read_events
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.spec import FinalSplitSpec
from a2c.runtime.data import DataError, split_final, write_jsonl

HERE = Path(__file__).resolve().parent
NOISY = [sys.executable, str(HERE / "noisy_evaluator.py")]


def records(n):
    return [{"id": f"q{i}", "prompt": f"{i}+1", "answer": str(i + 1)} for i in range(n)]


def test_split_final_is_seeded_disjoint_and_order_free():
    rows = records(200)
    feedback, final = split_final(rows, FinalSplitSpec(fraction=0.5, seed=0))
    assert len(feedback) == len(final) == 100
    assert not {r["id"] for r in feedback} & {r["id"] for r in final}
    again = split_final(list(reversed(rows)), FinalSplitSpec(fraction=0.5, seed=0))
    assert {r["id"] for r in again[1]} == {r["id"] for r in final}     # order does not matter
    other = split_final(rows, FinalSplitSpec(fraction=0.5, seed=1))
    assert {r["id"] for r in other[1]} != {r["id"] for r in final}     # the seed does
    assert split_final(rows, None) == (rows, [])
    assert len(split_final(rows, FinalSplitSpec(fraction=0.25, seed=3))[1]) == 50
    with pytest.raises(DataError, match="both parts need at least one"):
        split_final(records(3), FinalSplitSpec(fraction=0.1))


def model(path: Path, quality: float, tag: str) -> Path:
    path.mkdir(parents=True)
    (path / "model.safetensors").write_text(f"weights {tag}")
    (path / "config.json").write_text('{"model_type": "fake"}')
    (path / "QUALITY").write_text(str(quality))
    return path


def wait_idle(service, timeout=120.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if service.idle():
            return
        time.sleep(0.05)
    raise AssertionError("the service did not finish its queue")


def test_best_of_many_noisy_submissions_shows_a_positive_selection_gap(make_run, tmp_path):
    """Twenty submissions of the same true quality (0.6) differ only by noise; the best on the
    feedback items is selected on that noise, so on the final items it falls back: the gain
    measured on feedback exceeds the gain on final (selection gap > 0)."""
    from a2c.contracts.service_config import ServiceConfig
    from a2c.runtime.grader_service.core import GraderService
    from a2c.runtime.grader_service.final import score_final_split

    base = model(tmp_path / "base", 0.4, "base")
    run = make_run(evaluator=NOISY, base_model=str(base), snapshots=False)
    paths = RunPaths(run)
    feedback, final = split_final(records(200), FinalSplitSpec(fraction=0.5, seed=0))
    write_jsonl(paths.heldout, feedback)
    write_jsonl(paths.final_heldout, final)
    (run / "events.jsonl").touch()
    from a2c.runtime.grader_service.baseline import compute_baseline_for_run
    compute_baseline_for_run(run)       # the runner's step before the agent starts

    service = GraderService(ServiceConfig.load(run))
    service.start()
    output = run / "workspace" / "output"
    for n in range(20):
        model(output / f"m{n}", 0.6, f"candidate {n}")
        service.submit({"model_path": f"/workspace/output/m{n}"})
    wait_idle(service)
    service.stop()
    service.join(10)

    out = score_final_split(run, "best")
    scored = {str(e["id"]): e for e in (json.loads(line) for line in
              paths.journal.read_text().splitlines()) if e["op"] == "scored"}
    best_id = max(scored, key=lambda s: (scored[s]["score"], -int(s)))
    assert out["submission_id"] == int(best_id)
    assert out["feedback_score"] == max(e["score"] for e in scored.values())
    print(f"selection gap {out['selection_gap']:+.1f}: feedback {out['feedback_score']:.1f} vs "
          f"baseline {out['feedback_baseline']:.1f}; final {out['final_split_score']:.1f} vs "
          f"baseline {out['final_split_baseline']:.1f}")
    assert out["selection_gap"] > 3.0, out

    finals = [e["data"] for e in read_events(paths.events) if e["type"] == "final_scored"]
    assert sorted(d["subject"] for d in finals) == ["baseline", "submission"]
    for data in finals:
        result = json.loads((run / data["result"]).read_text())
        assert result["score"] == data["score"] and len(result["items"]) == 100
        assert {i["id"] for i in result["items"]} == {r["id"] for r in final}
    # the report's view: the same gap, with its interval over the two parts' items
    from a2c.analysis.record import RunRecord
    from a2c.analysis.trust import final_split as report_final_split
    section = report_final_split(RunRecord.load(run))
    assert section.selection_gap == pytest.approx(out["selection_gap"])
    lo, hi = section.selection_gap_interval.ci95
    assert lo < section.selection_gap < hi
    print(f"selection gap interval [{lo:+.1f}, {hi:+.1f}]: {section.selection_gap_statement}")
    # once: a second call (a resumed run) evaluates nothing again
    before = len(read_events(paths.events))
    assert score_final_split(run, "best") == out
    assert len(read_events(paths.events)) == before


def test_policy_last_scores_the_last_valid_submission(make_run, tmp_path):
    from a2c.contracts.service_config import ServiceConfig
    from a2c.runtime.grader_service.core import GraderService
    from a2c.runtime.grader_service.final import score_final_split

    base = model(tmp_path / "base", 0.4, "base")
    run = make_run(evaluator=NOISY, base_model=str(base), snapshots=False)
    paths = RunPaths(run)
    feedback, final = split_final(records(40), FinalSplitSpec(fraction=0.5, seed=0))
    write_jsonl(paths.heldout, feedback)
    write_jsonl(paths.final_heldout, final)
    (run / "events.jsonl").touch()
    service = GraderService(ServiceConfig.load(run))
    service.start()
    for n, q in enumerate((0.9, 0.2)):
        model(run / "workspace" / "output" / f"m{n}", q, f"m{n}")
        service.submit({"model_path": f"/workspace/output/m{n}"})
    wait_idle(service)
    service.stop()
    service.join(10)
    assert score_final_split(run, "last")["submission_id"] == 2


def test_no_final_split_scores_nothing(make_run):
    assert score_final_split_of(make_run()) is None


def score_final_split_of(run):
    from a2c.runtime.grader_service.final import score_final_split
    return score_final_split(run, "best")
