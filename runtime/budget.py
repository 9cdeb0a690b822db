"""The budget guard's arithmetic: the deadline and the warnings on the way to it.

Pure and clock-injected so it is testable without waiting; the runtime's loop calls `tick()` and
records what it returns. The deadline is fixed when the run starts and never moves (a resumed run
keeps it). The wall clock it guards is the run's `Budget.wall_clock_s` (a2c/contracts/budget.py,
where every limit of the run and its one enforcer are named).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

# Durations are read one way everywhere (specs, CLI, this guard): a2c.durations.
from a2c.durations import format_duration, parse_duration

__all__ = ["BudgetGuard", "format_duration", "parse_duration"]


@dataclass
class BudgetGuard:
    started_at: float            # unix seconds
    wall_clock_s: float
    thresholds: tuple[float, ...] = (0.5, 0.9)
    warned: set[float] = field(default_factory=set)
    deadline_hit: bool = False

    @property
    def deadline(self) -> float:
        return self.started_at + self.wall_clock_s

    def remaining(self, now: float | None = None) -> float:
        return max(0.0, self.deadline - (time.time() if now is None else now))

    def fraction_used(self, now: float | None = None) -> float:
        now = time.time() if now is None else now
        return min(1.0, max(0.0, (now - self.started_at) / self.wall_clock_s))

    def expired(self, now: float | None = None) -> bool:
        return self.remaining(now) <= 0

    def tick(self, now: float | None = None) -> list[tuple[str, dict]]:
        """Events due at `now`: budget_warning per threshold crossed, then deadline_reached once."""
        now = time.time() if now is None else now
        due: list[tuple[str, dict]] = []
        used = self.fraction_used(now)
        for threshold in self.thresholds:
            if used >= threshold and threshold not in self.warned:
                self.warned.add(threshold)
                due.append(("budget_warning", {
                    "fraction": threshold, "used_s": round(now - self.started_at, 3),
                    "remaining_s": round(self.remaining(now), 3)}))
        if self.expired(now) and not self.deadline_hit:
            self.deadline_hit = True
            due.append(("deadline_reached", {"deadline": self.deadline,
                                             "wall_clock_s": self.wall_clock_s}))
        return due
