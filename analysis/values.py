"""Values as the analysis stores them: finite numbers or None, rounded figures, and text clipped
to a width (with an ellipsis) wherever code, logs or outputs are quoted."""

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


def clip(text: str, width: int) -> str:
    """`text` if it fits in `width` characters, else its first width-1 and '…'."""
    return text if len(text) <= width else text[:width - 1] + "…"
