"""The report's submission rows (analysis/summary.py `submission_rows`) as the sections computed
from them read them: typed once, where the row is taken (a row is JSON: the plot may be drawn
from a report.json read back), then attributes.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class SubmissionRow:
    """One row of the report's `submissions` (the meaning of each field: docs/analysis.md)."""

    id: Any = None
    index: int = 0
    t_s: float | None = None
    received_at: str | None = None
    scored_at: str | None = None
    scored: bool = False
    valid: bool = False
    score: float | None = None
    ci95: list[float] | None = None
    error: str | None = None
    duplicate_of: str | None = None
    base_copy: bool = False
    model_path: str | None = None
    snapshot: str | None = None
    best_so_far: float | None = None
    improved: bool = False

    @classmethod
    def of(cls, row: dict[str, Any]) -> SubmissionRow:
        """The row as typed: a key the row lacks (an older report) takes the field's default."""
        return cls(**{f.name: row[f.name] for f in fields(cls)
                      if f.name in row or f.default is MISSING})

    @property
    def counted(self) -> bool:
        """A valid, scored submission that is not a copy of the base model."""
        return self.valid and self.score is not None and not self.base_copy


def rows_of(rows: list[dict[str, Any]]) -> list[SubmissionRow]:
    return [SubmissionRow.of(r) for r in rows]
