"""Numbers as the report stores them: finite floats or None, rounded where the schema says so."""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> float | None:
    """A real number as a float; None for missing, non-numeric, boolean, NaN or infinite values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
