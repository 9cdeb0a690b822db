"""One graded item of a `GradeResult` (a2c.contracts.grade_result), typed: the fields every
grader writes into `items` (`id, prompt, output, extracted, gold, correct, score, error`), and
`extracted_raw` and `extraction`, the exact-match grader's reading before normalisation (None:
nothing read) and how it read it (`pattern`, `last_number` or `none`). A reader of a result's items (`a2c check`'s gold-answer points) takes them through
this class instead of indexing each item; a grader's own extra keys stay in its item dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import Record


@dataclass
class GradedItem(Record):
    id: Any = None
    prompt: Any = None
    output: Any = None
    extracted: Any = None
    extracted_raw: Any = None
    extraction: str | None = None
    gold: Any = None
    correct: bool = False
    score: float = 0.0
    error: str | None = None


def graded_items(items: list[dict[str, Any]]) -> list[GradedItem]:
    """A result's `items`, typed (in order)."""
    return [GradedItem.from_dict(item) for item in items]
