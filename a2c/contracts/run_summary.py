"""What a run returns when it ends (`runtime/run/ending.py:summary`): the summary `a2c run` and
`a2c demo` print, `a2c check` reads and `a2c eval` passes on, typed once so no reader of it
indexes a dict.

Two keys say something by being there: `driver_usage` (the agent had a driver gateway, even one
it never called) and `final_split_score` (the task has a final split, even one whose scoring
failed); `driven` and `has_final_split` keep that, read from the dict the run builds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .records import Record, optional


@dataclass(frozen=True)
class DriverUsage(Record):
    """The driver line's numbers (`runtime/run/driver.py:usage_summary`): `tokens` counts all four
    kinds, as the gateway, the report and the leaderboard do; `exhausted` names the driver limit
    spent ({limit, budget, used}, or the limit's name), once one is."""

    calls: int = 0
    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    errors: int = 0
    exhausted: dict[str, Any] | str | None = None

    @property
    def spent_limit(self) -> Any:
        """The limit the driver budget ran out on (None while none has)."""
        if isinstance(self.exhausted, dict):
            return self.exhausted.get("limit")
        return self.exhausted


@dataclass
class RunSummary(Record):
    """A run as it ended: scores, counts, status, the record's folder; the driver's use for a
    driven agent; the agent's last log lines and one reason line when it did not finish."""

    run_id: str = ""
    task: str = ""
    agent: str = ""
    mode: str = ""
    isolation: str | None = None
    baseline_score: float | None = None
    best_score: float | None = None
    final_score: float | None = None
    submissions: int = 0
    valid_submissions: int = 0
    status: str = ""
    run_dir: str = ""
    final_split_score: float | None = optional()
    final_split_baseline: float | None = optional()
    selection_gap: float | None = optional()
    driver: str | None = optional()
    driver_usage: DriverUsage | None = optional()
    agent_log_tail: list[str] | None = optional()
    reason: str | None = optional()
    driven: bool = dataclasses.field(default=False, compare=False)
    has_final_split: bool = dataclasses.field(default=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status == "finished"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        usage = data.get("driver_usage")
        return dataclasses.replace(
            super().from_dict(data), driven="driver_usage" in data,
            has_final_split="final_split_score" in data,
            driver_usage=DriverUsage.from_dict(usage) if isinstance(usage, dict) else None)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for flag in ("driven", "has_final_split"):
            out.pop(flag)
        if self.driver_usage is not None:
            out["driver_usage"] = self.driver_usage.to_dict()
        return out
