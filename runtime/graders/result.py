"""Re-export: `GradeResult` lives in `a2c.contracts.grade_result` (the record's one owner)."""

from a2c.contracts.grade_result import GradeResult, _json_safe  # noqa: F401
