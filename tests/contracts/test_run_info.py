"""run.json through RunInfo: the keys the runtime has always written, round trips, unknown keys
kept, the fields that appear later absent until set."""

from __future__ import annotations

import json
import stat

from a2c.contracts.run_info import RUN_INFO_FORMAT, RunInfo, read_run_info, write_run_info

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
    info.update({"best_submission": None, "copies_of_base": 0}, transcript="logs/t.log")
    info["task_format"] = {"grader": "regex"}
    write_run_info(tmp_path, info)
    data = json.loads((tmp_path / "run.json").read_text())
    assert set(data) == PREPARED_KEYS | {"best_submission", "copies_of_base", "transcript",
                                         "task_format"}
    assert data["best_submission"] is None


def test_round_trip_keeps_unknown_keys(tmp_path):
    raw = {"run_id": "r", "task": "t", "agent": "a", "status": "running", "someday": [1, 2]}
    (tmp_path / "run.json").write_text(json.dumps(raw))
    info = read_run_info(tmp_path)
    assert info.status == "running" and info["someday"] == [1, 2]
    assert info.get("transcript") is None and "transcript" not in info
    write_run_info(tmp_path, info)
    again = json.loads((tmp_path / "run.json").read_text())
    assert again["someday"] == [1, 2] and again["status"] == "running"
    assert RunInfo.from_dict(again).to_dict() == again
