"""`sweep.json` in the runs folder: every trial, its run directory and status, rewritten
atomically on every change, so `a2c view` (and a maintainer's `jq`) read a sweep while it runs.
The file's shape is a2c.contracts.sweep_file (`SweepFile`), which its readers parse too; this
module keeps one in memory and moves its trials along as the engine reports them."""

from __future__ import annotations

import time
from pathlib import Path

from a2c.contracts.spec import SuiteSpec
from a2c.contracts.sweep_file import (
    FINISHED,
    QUEUED,
    RUNNING,
    SWEEP_FILE,
    SweepCounts,
    SweepFile,
    SweepTrial,
)
from a2c.fsutil import write_json_atomic
from a2c.timefmt import iso_utc

from .plan import TrialPlan
from .state import TrialOutcome


class SweepRecord:
    def __init__(self, runs_dir: Path, suite: SuiteSpec, digest: str,
                 plans: list[TrialPlan], address: str | None):
        self.path = runs_dir / SWEEP_FILE
        self.sweep = SweepFile(suite=suite.id, title=suite.title, suite_digest=digest,
                               address=address or "local", started_at=iso_utc(time.time()),
                               trials=[SweepTrial.of(p.trial, p.run_dir) for p in plans])
        self.index = {t.id: t for t in self.sweep.trials}

    def queued(self, trial_id: str) -> None:
        self.index[trial_id].status = QUEUED
        self.save()

    def running(self, trial_id: str, attempt: int, log: Path) -> None:
        """A Ray task submitted for the trial (`attempt` 0 first)."""
        trial = self.index[trial_id]
        trial.status, trial.attempts = RUNNING, attempt + 1
        trial.log, trial.submitted_at = str(log), iso_utc(time.time())
        self.save()

    def ended(self, trial_id: str, out: TrialOutcome) -> None:
        trial = self.index[trial_id]
        trial.status, trial.reason, trial.run_status = out.status, out.reason, out.run_status
        trial.best_score, trial.baseline_score = out.best_score, out.baseline_score
        trial.skipped = out.skipped
        if out.seconds is not None:
            trial.seconds = out.seconds
        self.save()

    def finish(self, leaderboard: dict[str, str], ran: list[str]) -> None:
        """The sweep's end: the leaderboard's files by format, the trials run this time."""
        self.sweep.leaderboard = leaderboard
        self.sweep.ended_at = iso_utc(time.time())
        self.sweep.ran = list(ran)
        self.save()

    def counts(self) -> SweepCounts:
        return self.sweep.count()

    def best_by_task(self) -> dict[str, float | None]:
        best: dict[str, float | None] = {}
        for t in self.sweep.trials:
            score = t.best_score if t.status == FINISHED else None
            current = best.get(t.task)
            best[t.task] = score if current is None or (score is not None and score > current) \
                else current
        return best

    def save(self) -> None:
        self.sweep.counts = self.counts()
        self.sweep.updated_at = iso_utc(time.time())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.sweep.to_dict())
