"""A trial's state, read from its run directory, and what a sweep does about it.

The policy (docs/sweeps.md, "Resuming"):
- no run directory, or one without run.json (it died while preparing) → run afresh (a leftover
  folder is moved aside to `<id>.aborted-N`, never deleted);
- run.json says the run ended (`finished`, `no_submission`, `agent_failed`) → done: skipped. Its
  outcome is the record's: `finished` (a score), or `failed` with the reason — an agent that
  crashed is a failed trial, never a score of 0;
- run.json says it has not ended (`prepared`, `running`: its process died, its node was lost) →
  resumed with `a2c run --resume` (the deadline does not move); after `max_resumes` failed
  resumes the trial is failed with the reason.
A done trial whose record does not verify is failed ("record does not verify: …"), not skipped
silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from a2c.contracts.run_info import ENDED, RunStatus, read_run_mapping
from a2c.contracts.run_paths import RunPaths

FRESH, RESUME, DONE = "fresh", "resume", "done"

Verifier = Callable[[Path], "str | None"]     # None if the record verifies, else the reason


@dataclass
class TrialState:
    action: str                  # fresh | resume | done
    run_status: RunStatus | str | None    # run.json's status, if any
    info: dict | None                     # run.json, as written


def read_state(run_dir: Path) -> TrialState:
    path = RunPaths(run_dir).run_json
    if not path.is_file():
        return TrialState(FRESH, None, None)
    try:
        info = read_run_mapping(path)
    except (OSError, ValueError):
        return TrialState(RESUME, None, None)
    status = RunStatus.of(info.get("status"))
    return TrialState(DONE if status in ENDED else RESUME, status, info)


def move_aside(run_dir: Path) -> Path | None:
    """A half-made run directory out of the way (kept for a post-mortem)."""
    if not run_dir.exists():
        return None
    n = 1
    while (target := run_dir.with_name(f"{run_dir.name}.aborted-{n}")).exists():
        n += 1
    run_dir.rename(target)
    return target


def outcome(run_dir: Path, verify: Verifier) -> dict:
    """{status: finished|failed, reason, best_score, baseline_score, run_status} of an ended
    trial."""
    state = read_state(run_dir)
    info = state.info or {}
    out = {"run_status": info.get("status", state.run_status), "best_score": info.get("best_score"),
           "baseline_score": info.get("baseline_score"), "reason": None}
    if state.action != DONE:
        out.update(status="failed", reason=f"the run did not end (status {state.run_status})")
        return out
    if state.run_status == RunStatus.AGENT_FAILED:
        tail = info.get("agent_log_tail") or []
        exit_info = info.get("agent_exit") or {}
        last = next((line for line in reversed(tail) if line.strip()), "")
        out.update(status="failed", reason=f"agent failed (exit {exit_info.get('returncode')}, "
                   f"{exit_info.get('reason') or 'no reason'})"
                   + (f": {last.strip()[:200]}" if last else ""))
        return out
    problem = verify(run_dir)
    if problem:
        out.update(status="failed", reason=f"record does not verify: {problem}")
        return out
    out["status"] = "finished"
    if state.run_status == RunStatus.NO_SUBMISSION:
        out["reason"] = "no submission (the run scored its baseline)"
    return out
