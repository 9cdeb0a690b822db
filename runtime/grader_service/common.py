"""What every part of the grader service shares: a refused request, the log line, and the ready
file (RUN/grader/ready) the server writes and the launcher reads."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from a2c.contracts.events import utc_now
from a2c.contracts.records import Record, optional
from a2c.contracts.submission_errors import SubmissionError


class Refusal(Exception):
    """A request the service refuses: HTTP status, error code (a SubmissionError), message, limit."""

    def __init__(self, status: int, code: str, message: str, limit: Any = None, **extra: Any):
        super().__init__(message)
        self.status, self.code, self.message, self.limit, self.extra = (
            status, SubmissionError(code).value, message, limit, extra)

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "limit": self.limit, **self.extra}


@dataclass
class ReadyInfo(Record):
    """RUN/grader/ready: the server's pid and where it listens (a Unix socket, TCP, or both)."""

    pid: int = 0
    started_at: float = 0.0
    socket_path: str | None = optional()
    unix_url: str | None = optional()
    host: str | None = optional()
    port: int | None = optional()
    url: str | None = optional()

    @property
    def urls(self) -> list[str]:
        return [u for u in (self.unix_url, self.url) if u]


def log(message: str) -> None:
    sys.stderr.write(f"{utc_now()} grader: {message}\n")
    sys.stderr.flush()
