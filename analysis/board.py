"""The leaderboard's table, typed: a column's statistics over a group's runs (`Stat`), a group of
runs (`Group`), the runs left out (`Excluded`) or still running (`Running`), and the whole
table (`Leaderboard`), which analysis/leaderboard.py builds and renders and `a2c view` shows.

The templates read these objects' attributes (Jinja's `board.groups`); a row's cells, keyed by
column, stay mappings, since the columns shown differ from table to table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .interval_records import GroupInterval


@dataclass(frozen=True)
class Stat:
    """A column over a group's runs: the mean, the sample standard deviation (None for one
    value), the min and max, and how many runs had a value."""

    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    n: int = 0

    @property
    def summary(self) -> tuple[float | None, float | None, float | None, float | None]:
        """(mean, std, min, max): the CSV's cells of a column."""
        return self.mean, self.std, self.min, self.max


@dataclass
class Group:
    """One row of the table: the runs that share the --by values (`key`) and the settings that
    change a run (`config`), with each column's statistics (`stats`, keyed by column)."""

    key: dict[str, str]
    config: dict[str, str]
    runs: int
    unverified: int
    run_ids: list[str]
    seeds: list[Any]
    repeats: str | None
    contaminated: list[str]
    stats: dict[str, Stat] = field(default_factory=dict)
    improvement_interval: GroupInterval | None = None
    labels: dict[str, str | None] = field(default_factory=dict)   # the settings as shown
    wall_clock_s: float | None = None

    @property
    def settings(self) -> dict[str, str]:
        """The group's config and --by values together (a --by value wins)."""
        return {**self.config, **self.key}


@dataclass(frozen=True)
class Excluded:
    """A run not counted, and why (its record failed verification, a failed trial)."""

    path: str
    reason: str | None


@dataclass(frozen=True)
class Running:
    """A run still in progress: neither counted nor excluded."""

    path: str
    status: str | None


@dataclass
class Leaderboard:
    by: list[str]
    added_keys: list[str]             # keys added to --by (a row is always one agent's)
    groups: list[Group]
    excluded: list[Excluded]
    running: list[Running]
    varying: list[str]                # the settings that split rows the --by values do not
    include_unverified: bool
    runs_dir: str
    n_runs: int
    budgets: list[str]                # the distinct wall clocks, as durations
    mixed_budgets: bool
    columns: list[str] = field(default_factory=list)      # the page's (compact) columns
    cells: list[dict[str, dict[str, str | None]]] = field(default_factory=list)
