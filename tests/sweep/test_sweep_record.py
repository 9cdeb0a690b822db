"""sweep.json as the typed SweepFile writes it: the keys a trial gains as it moves along (log and
submitted_at once started, run_status once ended, seconds once a Ray task returned), the sweep's
`ran` only at its end, and a reader's SweepFile reads back exactly what was written."""

from __future__ import annotations

import json
from pathlib import Path

from a2c.contracts.spec import SuiteSpec
from a2c.contracts.sweep_file import SWEEP_FILE, SweepFile
from a2c.contracts.trial import Trial
from a2c.sweep.plan import TrialPlan
from a2c.sweep.record import SweepRecord
from a2c.sweep.state import TrialOutcome

BASE = {"id", "group", "task", "agent", "driver", "mode", "seed", "run_dir", "resources",
        "status", "reason", "skipped", "best_score", "baseline_score", "attempts"}


def _record(tmp_path: Path) -> SweepRecord:
    plans = [TrialPlan(Trial(id=f"t{i}", group="g", task="arith", agent="ref-sft", seed=i,
                             resources={"agent": {"CPU": 1.0}}),
                       tmp_path / f"t{i}", tmp_path / "task", tmp_path / "agent")
             for i in range(3)]
    record = SweepRecord(tmp_path, SuiteSpec(id="s", title="S"), "digest", plans, None)
    record.save()
    return record


def _written(tmp_path: Path) -> dict:
    return json.loads((tmp_path / SWEEP_FILE).read_text())


def test_a_trial_gains_its_keys_as_it_moves_along(tmp_path):
    record = _record(tmp_path)
    first = _written(tmp_path)
    assert set(first) == {"format", "suite", "title", "suite_digest", "address", "started_at",
                          "ended_at", "updated_at", "leaderboard", "trials", "counts"}
    assert first["address"] == "local" and first["counts"] == {
        "queued": 3, "running": 0, "finished": 0, "failed": 0}
    assert all(set(t) == BASE for t in first["trials"])

    record.running("t0", 0, tmp_path / "t0.0.log")
    record.ended("t0", TrialOutcome("finished", None, 42.0, 1.0, "finished", seconds=3.5,
                                    attempts=1))
    record.ended("t1", TrialOutcome("failed", "agent failed (exit 3)", run_status=None))
    record.ended("t2", TrialOutcome("finished", None, 7.0, 1.0, "finished", skipped=True))
    trials = {t["id"]: t for t in _written(tmp_path)["trials"]}
    assert set(trials["t0"]) == BASE | {"log", "submitted_at", "run_status", "seconds"}
    assert trials["t0"]["attempts"] == 1 and trials["t0"]["seconds"] == 3.5
    assert set(trials["t1"]) == BASE | {"run_status"} and trials["t1"]["run_status"] is None
    assert trials["t2"]["skipped"] and "seconds" not in trials["t2"]
    assert record.best_by_task() == {"arith": 42.0}
    assert record.sweep.failed_runs() == {str(tmp_path / "t1"): "agent failed (exit 3)"}

    record.finish({"md": str(tmp_path / "leaderboard.md")}, ["t0"])
    last = _written(tmp_path)
    assert last["ran"] == ["t0"] and last["ended_at"] and last["counts"] == {
        "queued": 0, "running": 0, "finished": 2, "failed": 1}
    assert SweepFile.read(tmp_path / SWEEP_FILE).to_dict() == last
