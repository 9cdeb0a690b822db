"""The grader's journal, `submissions.jsonl`: its entries, its one writer and its one reader.

A `received` line is appended and fsync'ed before a submission is acknowledged, a `scored` line
when its result is in `results/<n>.json`. A crash can leave a torn last line, never acknowledged:
`Journal` drops it when it opens the file, and every reader skips a line that is not JSON.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from a2c.canonical import canonical_json
from a2c.fsutil import append_durable

from .records import Record, ScoredFields, optional, read_jsonl_tolerant

JOURNAL_FILE = "submissions.jsonl"


@dataclass
class JournalEntry(Record):
    OP: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.OP, **super().to_dict()}


@dataclass
class JournalReceived(JournalEntry):
    """A submission the service accepted (durable before the agent hears `queued`)."""

    OP: ClassVar[str] = "received"
    id: int | str = 0
    ts: str = ""
    model_path: str | None = None
    weights_hash: str | None = None
    note: str | None = None
    received_unix: float | None = optional()
    host_path: str | None = optional()
    stat: list[list[Any]] | None = optional()   # [[relative path, size, mtime_ns], ...]


@dataclass
class JournalScored(ScoredFields, JournalEntry):
    """The outcome of a submission: the fields of the `submission_scored` event
    (a2c.contracts.records.ScoredFields), and when, its metrics and its results file."""

    OP: ClassVar[str] = "scored"
    ts: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    result: str | None = None                    # results/<n>.json


ENTRY_TYPES: dict[str, type[JournalEntry]] = {"received": JournalReceived,
                                              "scored": JournalScored}


def entry_of(row: dict[str, Any]) -> JournalEntry | None:
    """The typed entry of a journal line (None for an unknown op)."""
    cls = ENTRY_TYPES.get(row.get("op"))  # type: ignore[arg-type]
    return cls.from_dict(row) if cls else None


def journal_path(run_dir_or_path: str | Path) -> Path:
    """RUN/submissions.jsonl for a run directory; the path itself for a file."""
    path = Path(run_dir_or_path)
    return path / JOURNAL_FILE if path.is_dir() else path


def read_journal(run_dir_or_path: str | Path,
                 on_skip: Callable[[int, str], None] | None = None) -> list[dict[str, Any]]:
    """Every parsable line, in order ([] without a journal); a line that is not JSON (a torn last
    line) is skipped (`on_skip(line, why)` hears of it)."""
    rows, problems = read_jsonl_tolerant(journal_path(run_dir_or_path))
    if on_skip is not None:
        for line, why in problems:
            on_skip(line, why)
    for row in rows:
        row.pop("_line", None)
    return rows


def read_journal_lines(run_dir_or_path: str | Path
                       ) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """(rows, problems) with each row's 1-based `_line`, for readers that name lines."""
    return read_jsonl_tolerant(journal_path(run_dir_or_path))


def journal_state(run_dir_or_path: str | Path) -> dict[str, Any]:
    """Submissions as the journal records them: {"received": {id: entry}, "scored": {id: entry},
    "pending": [ids received and not scored, in order]}; ids are strings."""
    received: dict[str, dict] = {}
    scored: dict[str, dict] = {}
    for entry in read_journal(run_dir_or_path):
        sid = str(entry.get("id"))
        if entry.get("op") == "received":
            received[sid] = entry
        elif entry.get("op") == "scored":
            scored[sid] = entry
    pending = [sid for sid in received if sid not in scored]
    return {"received": received, "scored": scored, "pending": pending}


class Journal:
    """The writer: append-only JSON lines with fsync; drops a torn last line left by a crash."""

    def __init__(self, path: str | Path, log: Callable[[str], None] | None = None):
        self.path = Path(path)
        self._log = log or (lambda message: None)
        self._lock = threading.Lock()
        self.repair()

    def repair(self) -> int:
        """Cut a torn last line (a write a crash interrupted, never acknowledged); bytes cut."""
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return 0
        cut = data.rfind(b"\n") + 1
        with open(self.path, "r+b") as handle:
            handle.truncate(cut)
            handle.flush()
            os.fsync(handle.fileno())
        self._log(f"journal: dropped a torn last line ({len(data) - cut} bytes)")
        return len(data) - cut

    def read(self) -> list[dict[str, Any]]:
        return read_journal(self.path, on_skip=lambda n, why: self._log(
            f"journal: line {n} is not JSON; skipped"))

    def append(self, entry: JournalEntry | dict[str, Any]) -> None:
        row = entry.to_dict() if isinstance(entry, JournalEntry) else entry
        data = canonical_json(row) + b"\n"
        with self._lock:
            append_durable(self.path, data)
