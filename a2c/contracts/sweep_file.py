"""`sweep.json` in a sweep's runs folder, typed: the sweep (`SweepFile`) and each of its trials
(`SweepTrial`), written by `a2c sweep` (a2c/sweep/record.py) on every change and read by
`a2c view` (and a maintainer's `jq`) while it runs.

Here, not in a2c/sweep/, so a reader of the file (the analysis) parses it with the class its
writer uses. A trial's `run_status` is written once the trial ended, `log` and `submitted_at`
once a Ray task started it, `seconds` once one returned; the sweep's `ran` once it ended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .records import Record, optional
from .trial import Trial

SWEEP_FILE = "sweep.json"
SWEEP_FORMAT = "a2c-sweep/1"
QUEUED, RUNNING, FINISHED, FAILED = "queued", "running", "finished", "failed"
ENDED_TRIAL = (FINISHED, FAILED)


@dataclass
class SweepCounts(Record):
    """How many trials stand where (sweep.json `counts`)."""

    queued: int = 0
    running: int = 0
    finished: int = 0
    failed: int = 0


@dataclass
class SweepTrial(Record):
    """One trial as sweep.json lists it: what it runs, where its record goes, where it stands."""

    id: str = ""
    group: str = ""
    task: str = ""
    agent: str = ""
    driver: str | None = None
    mode: str = ""
    seed: int = 0
    run_dir: str = ""
    resources: dict[str, dict[str, float]] = field(default_factory=dict)
    status: str = QUEUED
    reason: str | None = None
    skipped: bool = False
    best_score: float | None = None
    baseline_score: float | None = None
    attempts: int = 0
    run_status: str | None = None        # run.json's status, once the trial ended
    log: str | None = optional()         # the Ray task's output, once one started
    submitted_at: str | None = optional()
    seconds: float | None = optional()   # the last Ray task's, once one returned

    @classmethod
    def of(cls, trial: Trial, run_dir: Path) -> SweepTrial:
        return cls(id=trial.id, group=trial.group, task=trial.task, agent=trial.agent,
                   driver=trial.driver, mode=trial.mode, seed=trial.seed, run_dir=str(run_dir),
                   resources=trial.resources)

    @property
    def ended(self) -> bool:
        return self.status in ENDED_TRIAL

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if not self.ended:
            del out["run_status"]
        return out


@dataclass
class SweepFile(Record):
    """The whole of sweep.json: the suite, where it runs, when, the leaderboard's files by
    format once written, every trial and the counts."""

    format: str = SWEEP_FORMAT
    suite: str = ""
    title: str | None = None
    suite_digest: str = ""
    address: str = "local"
    started_at: str | None = None
    ended_at: str | None = None
    updated_at: str | None = None
    leaderboard: dict[str, str] | None = None
    trials: list[SweepTrial] = field(default_factory=list)
    counts: SweepCounts = field(default_factory=SweepCounts)
    ran: list[str] | None = optional()   # the trials a Ray task ran for, once it ended

    def count(self) -> SweepCounts:
        statuses = [trial.status for trial in self.trials]
        return SweepCounts(queued=statuses.count(QUEUED), running=statuses.count(RUNNING),
                           finished=statuses.count(FINISHED), failed=statuses.count(FAILED))

    def failed_runs(self) -> dict[str, str]:
        """{run directory: why} of the failed trials (the leaderboard lists them as excluded)."""
        return {t.run_dir: t.reason or FAILED for t in self.trials if t.status == FAILED}

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["trials"] = [t.to_dict() for t in self.trials]
        out["counts"] = self.counts.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepFile:
        sweep = super().from_dict(data)
        sweep.trials = [SweepTrial.from_dict(t) for t in data.get("trials") or []]
        sweep.counts = SweepCounts.from_dict(data.get("counts") or {})
        return sweep

    @classmethod
    def read(cls, path: Path) -> SweepFile | None:
        """The file at `path`, or None when it is missing or not a sweep's JSON object."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cls.from_dict(data) if isinstance(data, dict) else None
