"""The budget guard's arithmetic: durations, the deadline and the warnings on the way to it.

Pure and clock-injected so it is testable without waiting; the runtime's loop calls `tick()` and
records what it returns. The deadline is fixed when the run starts and never moves (a resumed run
keeps it).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from a2c.errors import A2CError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_duration(text: str | int | float) -> float:
    """'90', '90s', '15m', '1h30m', '2.5h' -> seconds."""
    if isinstance(text, (int, float)):
        if text <= 0:
            raise A2CError(f"budget must be positive, got {text}")
        return float(text)
    raw = str(text).strip().lower().replace(" ", "")
    try:
        value = float(raw)
    except ValueError:
        pos, value = 0, 0.0
        for match in _PART.finditer(raw):
            if match.start() != pos:
                break
            value += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(raw) or not raw:
            raise A2CError(f"cannot read duration {text!r} (examples: 90s, 15m, 1h30m, 3600)")
    if value <= 0:
        raise A2CError(f"budget must be positive, got {text!r}")
    return value


def format_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


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
