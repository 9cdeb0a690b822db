"""What every part of the grading service shares: a refused request, the log line, the small
helpers over a submission's files and metrics."""

from __future__ import annotations

import sys
from pathlib import Path
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


def _stat_signature(path: Path) -> list:
    if path.is_file():
        st = path.stat()
        return [["", st.st_size, st.st_mtime_ns]]
    out = []
    for p in sorted(path.rglob("*")):
        try:
            st = p.stat()
        except OSError:
            continue
        if p.is_file():
            out.append([p.relative_to(path).as_posix(), st.st_size, st.st_mtime_ns])
    return out
