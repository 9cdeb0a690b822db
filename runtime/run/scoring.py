"""The run's scores as the grader's journal records them (`a2c.contracts.journal`), by the
task's scoring policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2c.contracts.grade_result import read_result
from a2c.contracts.journal import journal_state
from a2c.contracts.run_paths import RunPaths


def sort_key(sid: str):
    return (0, int(sid)) if sid.isdigit() else (1, sid)


def score_run(run_dir: Path, policy: str) -> dict[str, Any]:
    state = journal_state(run_dir)
    valid = [(sid, e) for sid, e in sorted(state["scored"].items(), key=lambda kv: sort_key(kv[0]))
             if e.get("valid", True) and e.get("score") is not None]
    best = max((float(e["score"]) for _, e in valid), default=None)
    last = float(valid[-1][1]["score"]) if valid else None
    final = last if policy == "last" else best
    best_id = None
    if best is not None:
        best_id = next(sid for sid, e in valid if float(e["score"]) == best)
    return {"submissions": len(state["received"]), "valid_submissions": len(valid),
            "best_score": best, "final_score": final, "best_submission": best_id,
            "pending": state["pending"],
            "copies_of_base": sum(1 for e in state["scored"].values() if e.get("copy_of_base"))}


def baseline_score(run_dir: Path) -> float | None:
    path = RunPaths(run_dir).baseline_result
    if not path.is_file():
        return None
    data = read_result(path)
    if data.get("valid") is False:
        return None
    return data.get("score")
