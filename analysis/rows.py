"""The report's submission rows, typed once: built by analysis/summary.py (`submission_rows`)
from the record, written as the report's `submissions` JSON (in this field order), and read
back as the same class by the sections computed from that JSON (the plot, the process metrics,
the route and the driver section: a report.json may be read back, and an older one lacks the
newer keys, which take their defaults).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2c.contracts.records import Record


@dataclass
class SubmissionRow(Record):
    """One row of the report's `submissions` (the meaning of each field: docs/analysis.md): a
    submission as the record gives it, on the agent's clock, with the best score so far and
    whether it improved on it."""

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
    note: str | None = None
    model_path: str | None = None
    weights_hash: str | None = None
    elapsed_s: float | None = None
    backend: str | None = None
    result_file: str | None = None
    snapshot: str | None = None
    best_so_far: float | None = None
    improved: bool = False

    @classmethod
    def of(cls, row: dict[str, Any]) -> SubmissionRow:
        """A row of report JSON as typed: a key the row lacks (an older report) takes the
        field's default."""
        return cls.from_dict(row)

    @property
    def counted(self) -> bool:
        """A valid score of the agent's own model (a copy of the base model never counts)."""
        return self.valid and self.score is not None and not self.base_copy


def rows_of(rows: list[dict[str, Any]]) -> list[SubmissionRow]:
    return [SubmissionRow.of(r) for r in rows]
