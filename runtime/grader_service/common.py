"""What every part of the grader service shares: a refused request and the log line."""

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
