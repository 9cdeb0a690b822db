"""run.json through RunInfo: the keys the runtime has always written, round trips, unknown keys
kept, the fields that appear later absent until set."""

from __future__ import annotations

import json
import stat

from a2c.contracts.budget import Budget
from a2c.contracts.run_info import (
    RUN_INFO_FORMAT,
    UNSET,
    RunInfo,
    read_run_info,
    write_run_info,
)

PREPARED_KEYS = {
    "run_id", "task", "level", "title", "agent", "agent_digest", "driver", "mode", "seed",
    "backend", "base_model", "data", "bundle_digest", "spec_hash", "isolation", "budget",
    "scoring", "baseline_score", "best_score", "final_score", "submissions", "valid_submissions",
    "status", "started_at", "ended_at", "deadline", "agent_started_at", "versions", "sandbox_id",
    "options", "agent_exit", "resumes", "format"}


def test_prepared_keys_and_later_ones(tmp_path):
    info = RunInfo(run_id="r", task="arith", agent="ref-sft")
    write_run_info(tmp_path, info)
    data = json.loads((tmp_path / "run.json").read_text())
    assert set(data) == PREPARED_KEYS and data["format"] == RUN_INFO_FORMAT
    assert stat.S_IMODE((tmp_path / "run.json").stat().st_mode) == 0o600   # the operator's only
    info.best_submission, info.copies_of_base, info.transcript = None, 0, "logs/t.log"
    info.task_format = {"grader": "regex"}
    write_run_info(tmp_path, info)
    data = json.loads((tmp_path / "run.json").read_text())
    assert set(data) == PREPARED_KEYS | {"best_submission", "copies_of_base", "transcript",
                                         "task_format"}
    assert data["best_submission"] is None


def test_round_trip_keeps_unknown_keys(tmp_path):
    raw = {"run_id": "r", "task": "t", "agent": "a", "status": "running", "someday": [1, 2]}
    (tmp_path / "run.json").write_text(json.dumps(raw))
    info = read_run_info(tmp_path)
    assert info.status == "running" and info.extra["someday"] == [1, 2]
    assert info.transcript is UNSET and info.gpus is None
    assert "transcript" not in info.to_dict() and "gpus" not in info.to_dict()
    write_run_info(tmp_path, info)
    again = json.loads((tmp_path / "run.json").read_text())
    assert again["someday"] == [1, 2] and again["status"] == "running"
    assert RunInfo.from_dict(again).to_dict() == again


def test_the_budget_is_typed_and_written_as_the_limits_that_are_set(tmp_path):
    """run.json `budget`: a `Budget`; an unset driver or sandbox limit is left out, an older
    record's missing (or null) wall clock takes the one default."""
    info = RunInfo(run_id="r", task="t", agent="a",
                   budget=Budget(wall_clock_s=90, driver_tokens=1000))
    write_run_info(tmp_path, info)
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["budget"] == {"wall_clock_s": 90, "gpus": 1, "max_submissions": 30,
                              "min_interval_s": 0, "eval_timeout_s": 3600,
                              "driver_tokens": 1000}
    again = read_run_info(tmp_path)
    assert again.budget == info.budget and again.budget.driver_calls is None
    data["budget"] = {"wall_clock_s": None, "max_submissions": 4}
    assert RunInfo.from_dict(data).budget == Budget(max_submissions=4)
