"""Timestamps in the record: one ISO-8601 UTC form (millisecond precision, `Z` suffix).

Events, journals, run.json and reports all write and read times through these two functions, so a
time written by the runtime parses back in the analysis to the same instant.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any


def iso_utc(ts: float | None) -> str | None:
    """Unix seconds -> '2026-11-30T12:00:00.000Z' (None stays None)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_time(value: Any) -> float | None:
    """Unix seconds from a number, an ISO string (with `Z` or an offset), or None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()
