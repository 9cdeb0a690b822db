"""A results file (`results/<n>.json`, `results/baseline.json`, `results/final-<id>.json`) as
the analysis reads it, typed: the grader's result (a2c.contracts.grade_result.GradeResult) plus
what the grader service adds (`copy_of_base`, `provenance`). Read tolerantly, unlike
`GradeResult`: the analysis reads damaged and older records too, so every field may be missing
(None) or of another type than the grader writes, for the verify checks to name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2c.contracts.records import Record


@dataclass(frozen=True)
class ResultFile(Record):
    score: Any = None
    ci95: Any = None
    n_items: Any = None
    items: Any = None
    metrics: Any = None
    grader: Any = None
    grader_version: Any = None
    backend: Any = None
    elapsed_s: Any = None
    valid: Any = None
    error: Any = None
    copy_of_base: Any = None
    provenance: Any = None

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> ResultFile | None:
        """`RunRecord.result`'s dict typed (None for a missing or unreadable file)."""
        return cls.from_dict(data) if data is not None else None
