"""Durations as people write them (`12h`, `1h30m`, `2.5h`, `90`), read one way everywhere.

Specs (`budget.wall_clock: 12h`), the CLI (`--budget 15m`) and the runtime's guard all go through
`parse_duration`, so a value the compiler accepts is a value the runtime accepts and vice versa.
Units come largest first (d, h, m, s), each at most once; a bare number is seconds. Whole results
are ints so that resolved specs (and therefore bundle bytes) do not change with the parser.
"""

from __future__ import annotations

import re

from a2c.errors import A2CError

_NUMBER = r"(\d+(?:\.\d+)?)"
_DURATION = re.compile(rf"^(?:{_NUMBER}d)?(?:{_NUMBER}h)?(?:{_NUMBER}m)?(?:{_NUMBER}s)?$")
_UNIT_SECONDS = (86400, 3600, 60, 1)
# The same grammar for JSON Schema (specs): digits first, then the units in order.
SCHEMA_PATTERN = r"^(?=\d)(\d+(\.\d+)?d)?(\d+(\.\d+)?h)?(\d+(\.\d+)?m)?(\d+(\.\d+)?s)?$"


class DurationError(A2CError, ValueError):
    """A duration that cannot be read, or one that must be positive and is not: bad input, so
    exit status 2 like every other input error (a spec's, a bad flag's), wherever it is read."""

    exit_code = 2


def parse_duration(value: str | int | float, *, allow_zero: bool = False) -> int | float:
    """'90', '90s', '15m', '1h30m', '2.5h', '1d', 45 -> seconds (int when whole)."""
    if isinstance(value, bool):
        raise DurationError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        seconds: float = value
    else:
        raw = str(value).strip().lower().replace(" ", "")
        try:
            seconds = float(raw)
        except ValueError:
            match = _DURATION.match(raw)
            if not raw or not match or not any(match.groups()):
                raise DurationError(
                    f"cannot read duration {value!r} (examples: 90s, 15m, 1h30m, 2.5h, 3600)")
            seconds = sum(float(part) * unit
                          for part, unit in zip(match.groups(), _UNIT_SECONDS) if part)
    if seconds < 0 or (seconds == 0 and not allow_zero) or seconds != seconds:
        raise DurationError(f"duration must be {'non-negative' if allow_zero else 'positive'}, "
                            f"got {value!r}")
    return int(seconds) if float(seconds).is_integer() else float(seconds)


def format_duration(seconds: float) -> str:
    """Seconds -> '1h02m05s' / '2m05s' / '5s', for people."""
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")
