"""`sweep.json` in a runs folder, typed for its readers: every trial of a sweep, its run
directory and status (written by a2c/sweep/record.py, rewritten on every change; read by
`a2c view`, analysis/view.py). Read tolerantly, as every record: a sweep still being written, or
an older one, lacks keys, which take their defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .parts import Part

SWEEP_FILE = "sweep.json"
SWEEP_FORMAT = "a2c-sweep/1"


@dataclass(frozen=True)
class SweepTrial(Part):
    """One trial: what it runs, where its record goes, and where it stands (`status`: queued,
    running, finished, failed; `reason` why it failed or was skipped)."""

    id: str = ""
    group: Any = None
    task: str | None = None
    agent: str | None = None
    driver: str | None = None
    mode: str | None = None
    seed: Any = None
    run_dir: str = ""
    resources: Any = None
    status: str = "queued"
    reason: str | None = None
    skipped: bool = False
    best_score: float | None = None
    baseline_score: float | None = None
    attempts: int = 0


@dataclass(frozen=True)
class SweepFile(Part):
    """The whole file: the suite, where the sweep runs, when it started and ended, its trials."""

    format: str = SWEEP_FORMAT
    suite: str | None = None
    title: str | None = None
    suite_digest: str | None = None
    address: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    leaderboard: Any = None
    trials: tuple[SweepTrial, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    updated_at: str | None = None
