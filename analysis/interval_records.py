"""The intervals the report and the leaderboard hold, typed: a2c.intervals computes each one as
the JSON object the report writes; the analysis reads it here, once, into a record whose fields
are that object's keys in its order (so `to_dict()` writes the same JSON), and passes the record.

- `PairedInterval`: best − baseline over the same items (`paired_improvement`), the report's
  `improvement.paired_interval` and `final_split.paired_interval`;
- `DifferenceInterval`: two independent samples (`difference_interval`), the selection gap's;
- `GroupInterval`: a leaderboard group's improvement, across its seeds (`improvement_interval`)
  or, for a group of one run, its paired interval over items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2c.contracts.records import Record, optional


@dataclass
class PairedInterval(Record):
    """a2c.intervals.paired_interval (plus `items_only_in_one` from paired_improvement)."""

    method: str = "BCa"
    seed: int = 0
    n_items: int = 0
    n_resamples: int | None = None
    confidence: float | None = None
    difference: float | None = None
    ci95: list[float] | None = None
    outside_noise: bool | None = None
    items_only_in_one: int | None = optional()

    @classmethod
    def of(cls, raw: dict[str, Any] | None) -> PairedInterval | None:
        return cls.from_dict(raw) if raw else None


@dataclass
class DifferenceInterval(Record):
    """a2c.intervals.difference_interval: `n` the two samples' sizes."""

    method: str = "percentile"
    seed: int = 0
    n: list[int] | None = None
    confidence: float | None = None
    difference: float | None = None
    ci95: list[float] | None = None
    outside_noise: bool | None = None

    @classmethod
    def of(cls, raw: dict[str, Any] | None) -> DifferenceInterval | None:
        return cls.from_dict(raw) if raw else None


@dataclass
class GroupInterval(Record):
    """A leaderboard group's improvement interval: `over` "seeds" (the mean improvement across
    the seeds, a2c.intervals.improvement_interval) or "items" (a group of one run: its paired
    interval); `n` the seeds or the paired items."""

    over: str = "seeds"
    mean: float | None = None
    ci95: list[float] | None = None
    method: str | None = None
    seed: int = 0
    n: int = 0
    outside_noise: bool | None = None
    confidence: float | None = None

    @classmethod
    def of_paired(cls, paired: PairedInterval) -> GroupInterval:
        return cls(over="items", mean=paired.difference, ci95=paired.ci95, method=paired.method,
                   seed=paired.seed, n=paired.n_items, outside_noise=paired.outside_noise)

    @property
    def marker(self) -> str:
        """"*" when the interval excludes 0."""
        return "*" if self.outside_noise else ""
