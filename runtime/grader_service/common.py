"""What every part of the grader service shares: a refused request, the log line, the small
helpers over a submission's files and metrics."""

from __future__ import annotations

import sys
from typing import Any

from a2c.contracts.events import utc_now
from a2c.contracts.submission_errors import SubmissionError


class Refusal(Exception):
    """A request the service refuses: HTTP status, error code (a SubmissionError), message, limit."""

    def __init__(self, status: int, code: str, message: str, limit: Any = None, **extra: Any):
        super().__init__(message)
        self.status, self.code, self.message, self.limit, self.extra = (
            status, SubmissionError(code).value, message, limit, extra)

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "limit": self.limit, **self.extra}


def log(message: str) -> None:
    sys.stderr.write(f"{utc_now()} grader: {message}\n")
    sys.stderr.flush()


def _scalar_metrics(metrics: Any) -> dict[str, Any]:
    if not isinstance(metrics, dict):
        return {}
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool)) or v is None}


def result_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The journal's view of a GradeResult: score and CI only when valid, the error and its code
    otherwise, the scalar metrics."""
    valid = result.get("valid", True) is not False
    return {"score": result.get("score") if valid else None,
            "ci95": result.get("ci95") if valid else None, "valid": valid,
            "error": None if valid else (result.get("error") or "invalid result"),
            "code": None if valid else (result.get("code")
                                        or SubmissionError.GRADER_INVALID.value),
            "backend": result.get("backend"), "metrics": _scalar_metrics(result.get("metrics")),
            "n_items": result.get("n_items")}
