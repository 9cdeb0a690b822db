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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.records import Record
from a2c.contracts.run_info import ENDED, RunStatus, read_run_mapping
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.sweep_file import FAILED, FINISHED

FRESH, RESUME, DONE = "fresh", "resume", "done"

Verifier = Callable[[Path], "str | None"]     # None if the record verifies, else the reason


@dataclass
class RunEndExit(Record):
    """run.json's `agent_exit` as the sweep names it in a failed trial's reason (a2c.contracts.
    run_info.AgentExit defaults its reason; here a record without one says so)."""

    returncode: int | None = None
    reason: str | None = None


@dataclass
class RunEnd(Record):
    """What a sweep reads of a trial's run.json: read as a partial record (a run that died
    while preparing, a stand-in's), so every field has a default."""

    status: str | None = None
    best_score: float | None = None
    baseline_score: float | None = None
    agent_log_tail: list[str] = field(default_factory=list)
    agent_exit: RunEndExit = field(default_factory=RunEndExit)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunEnd:
        end = super().from_dict(data)
        end.agent_log_tail = list(end.agent_log_tail or [])
        exit_info = data.get("agent_exit")
        end.agent_exit = RunEndExit.from_dict(exit_info if isinstance(exit_info, dict) else {})
        return end


@dataclass
class TrialState:
    action: str                  # fresh | resume | done
    run_status: RunStatus | str | None    # run.json's status, if any
    info: RunEnd | None                   # run.json, as far as the sweep reads it


@dataclass
class TrialOutcome:
    """How a trial ended (sweep.json takes it over): `finished` (a score) or `failed` with the
    reason; `skipped` when an earlier sweep ran it; the last Ray task's seconds and attempts."""

    status: str
    reason: str | None = None
    best_score: float | None = None
    baseline_score: float | None = None
    run_status: str | None = None
    skipped: bool = False
    seconds: float | None = None
    attempts: int | None = None


def read_state(run_dir: Path) -> TrialState:
    path = RunPaths(run_dir).run_json
    if not path.is_file():
        return TrialState(FRESH, None, None)
    try:
        info = RunEnd.from_dict(read_run_mapping(path))
    except (OSError, ValueError):
        return TrialState(RESUME, None, None)
    status = RunStatus.of(info.status)
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


def outcome(run_dir: Path, verify: Verifier) -> TrialOutcome:
    """The outcome of a trial whose run ended (or did not: failed)."""
    state = read_state(run_dir)
    info = state.info or RunEnd()

    def said(status: str, reason: str | None) -> TrialOutcome:
        return TrialOutcome(status, reason, info.best_score, info.baseline_score, info.status)
    if state.action != DONE:
        return said(FAILED, f"the run did not end (status {state.run_status})")
    if state.run_status == RunStatus.AGENT_FAILED:
        last = next((line for line in reversed(info.agent_log_tail) if line.strip()), "")
        return said(FAILED, f"agent failed (exit {info.agent_exit.returncode}, "
                    f"{info.agent_exit.reason or 'no reason'})"
                    + (f": {last.strip()[:200]}" if last else ""))
    problem = verify(run_dir)
    if problem:
        return said(FAILED, f"record does not verify: {problem}")
    if state.run_status == RunStatus.NO_SUBMISSION:
        return said(FINISHED, "no submission (the run scored its baseline)")
    return said(FINISHED, None)
