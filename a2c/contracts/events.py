"""The run record's spine: an append-only, hash-chained `events.jsonl`, and its event types.

Each event carries the hash of the one before it, so editing, inserting, reordering or deleting any
line breaks the chain at that line and `verify_events` names it. Appends are fsync'ed because the
record must survive a crash of the runtime at any point. Each event type's `data` is one payload
class below (`EVENT_TYPES`); `EventLog.emit(payload)` writes one, `payload_of(event)` reads one.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from a2c.canonical import canonical_json, sha256_bytes
from a2c.timefmt import iso_utc

from .records import Record, optional

GENESIS = "0" * 64
EVENTS_FILE = "events.jsonl"


def utc_now() -> str:
    return iso_utc(time.time())


def event_hash(event: dict[str, Any]) -> str:
    body = {k: v for k, v in event.items() if k != "hash"}
    return sha256_bytes(canonical_json(body))


# ----------------------------------------------------------------------------- payloads
@dataclass
class EventPayload(Record):
    TYPE: ClassVar[str] = ""


@dataclass
class RunStarted(EventPayload):
    """The run's identity (a subset of run.json, written by the runtime at the first start)."""

    TYPE: ClassVar[str] = "run_started"
    run_id: str | None = None
    task: str | None = None
    level: int | None = optional()
    agent: str | None = None
    agent_digest: str | None = optional()
    driver: str | None = None
    mode: str | None = None
    seed: int | None = None
    backend: str | None = optional()
    isolation: str | None = optional()
    base_model: Any = optional()
    data: dict[str, Any] | None = optional()
    bundle_digest: str | None = None
    spec_hash: str | None = optional()
    budget: dict[str, Any] | None = None
    scoring: dict[str, Any] | None = optional()
    versions: dict[str, Any] | None = optional()


@dataclass
class RunResumed(EventPayload):
    TYPE: ClassVar[str] = "run_resumed"
    resume: int | None = None
    pending: list[str] = field(default_factory=list)
    deadline: float | None = None
    agent_exit: dict[str, Any] | None = None


@dataclass
class BaselineScored(EventPayload):
    TYPE: ClassVar[str] = "baseline_scored"
    score: float | None = None
    ci95: list[float] | None = None
    valid: bool | None = optional()
    error: str | None = optional()
    cached: bool | None = optional()
    key: str | None = optional()
    elapsed_s: float | None = None
    backend: str | None = None
    weights_hash: str | None = optional()


@dataclass
class AgentStarted(EventPayload):
    TYPE: ClassVar[str] = "agent_started"
    deadline: float | None = None
    wall_clock_s: float | None = None
    isolation: str | None = None
    resumed: bool = False


@dataclass
class SubmissionReceived(EventPayload):
    TYPE: ClassVar[str] = "submission_received"
    id: int | str = 0
    model_path: str | None = None
    weights_hash: str | None = None
    note: str | None = optional()


@dataclass
class SubmissionScored(EventPayload):
    """A scored (or invalid) submission. `code` (a2c.contracts.submission_errors) says why it is
    invalid; `copy_of_base` whether its weights are the untouched base model's."""

    TYPE: ClassVar[str] = "submission_scored"
    id: int | str = 0
    score: float | None = None
    ci95: list[float] | None = None
    valid: bool = False
    error: str | None = None
    code: str | None = None
    duplicate_of: int | str | None = None
    copy_of_base: bool | None = None
    elapsed_s: float | None = None
    backend: str | None = None


@dataclass
class Snapshot(EventPayload):
    TYPE: ClassVar[str] = "snapshot"
    commit: str = ""
    reason: str | None = None            # submission | periodic | final
    submission_id: int | str | None = None
    files: int | None = None
    bytes: int | None = None
    changed: bool | None = optional()
    excluded: int | None = optional()


@dataclass
class BudgetWarning(EventPayload):
    TYPE: ClassVar[str] = "budget_warning"
    fraction: float | None = optional()
    used_s: float | None = optional()
    remaining_s: float | None = None


@dataclass
class DeadlineReached(EventPayload):
    TYPE: ClassVar[str] = "deadline_reached"
    deadline: float | None = None
    wall_clock_s: float | None = None
    note: str | None = optional()


@dataclass
class AgentExited(EventPayload):
    TYPE: ClassVar[str] = "agent_exited"
    returncode: int | None = None
    reason: str | None = None
    stop: dict[str, Any] | None = optional()


@dataclass
class RunFinished(EventPayload):
    TYPE: ClassVar[str] = "run_finished"
    baseline_score: float | None = None
    best_score: float | None = None
    final_score: float | None = None
    submissions: int | None = optional()
    valid_submissions: int | None = optional()
    status: str | None = optional()


EVENT_TYPES: dict[str, type[EventPayload]] = {cls.TYPE: cls for cls in (
    RunStarted, RunResumed, BaselineScored, AgentStarted, SubmissionReceived, SubmissionScored,
    Snapshot, BudgetWarning, DeadlineReached, AgentExited, RunFinished)}


@dataclass
class Event(Record):
    """One line of events.jsonl (the envelope; `data` is the type's payload as a dict)."""

    seq: int = 0
    ts: str = ""
    type: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    prev: str = GENESIS
    hash: str = ""


def payload_of(event: dict[str, Any]) -> EventPayload | None:
    """The typed payload of an event dict (None for a type this a2c does not know)."""
    cls = EVENT_TYPES.get(event.get("type"))  # type: ignore[arg-type]
    data = event.get("data")
    return cls.from_dict(data if isinstance(data, dict) else {}) if cls else None


# ----------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class ChainCheck:
    ok: bool
    events: int
    bad_line: int | None = None  # 1-based line number of the first broken line
    reason: str | None = None


def verify_events(path: str | Path) -> ChainCheck:
    """Check every line's hash and link; report the first broken line (1-based)."""
    path = Path(path)
    if not path.exists():
        return ChainCheck(False, 0, None, f"{path} does not exist")
    prev = GENESIS
    count = 0
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                event = json.loads(raw)
            except ValueError as exc:
                return ChainCheck(False, count, lineno, f"not valid JSON: {exc}")
            if not isinstance(event, dict):
                return ChainCheck(False, count, lineno, "not a JSON object")
            if event.get("seq") != count:
                return ChainCheck(False, count, lineno,
                                  f"sequence number {event.get('seq')!r}, expected {count}")
            if event.get("prev") != prev:
                return ChainCheck(False, count, lineno, "does not link to the previous event")
            if event.get("hash") != event_hash(event):
                return ChainCheck(False, count, lineno, "content does not match its hash")
            prev = event["hash"]
            count += 1
    return ChainCheck(True, count)


def read_events(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# ----------------------------------------------------------------------------- writing
def _last_line(fd: int) -> bytes | None:
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0:
        return None
    block, data = 4096, b""
    pos = size
    while pos > 0:
        step = min(block, pos)
        pos -= step
        data = os.pread(fd, step, pos) + data
        stripped = data.rstrip(b"\n")
        if b"\n" in stripped:
            return stripped.rsplit(b"\n", 1)[1]
    return data.rstrip(b"\n") or None


class EventLog:
    """Appends chained events to `events.jsonl` from any number of processes.

    The runtime and the grader service both record events; an exclusive `flock` around
    read-last-line + append + fsync keeps the chain linear. Reopening continues the chain (resume).
    """

    def __init__(self, path: str | Path, verify: bool = True):
        self.path = Path(path)
        self._lock = threading.Lock()
        if verify and self.path.exists() and self.path.stat().st_size:
            check = verify_events(self.path)
            if not check.ok:
                raise ValueError(f"{self.path}:{check.bad_line}: {check.reason}; refusing to append")

    def emit(self, payload: EventPayload) -> dict[str, Any]:
        """Append one typed event."""
        return self.append(payload.TYPE, payload.to_dict())

    def append(self, type_: str, data: dict[str, Any] | EventPayload | None = None
               ) -> dict[str, Any]:
        if isinstance(data, EventPayload):
            data = data.to_dict()
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                last = _last_line(fd)
                if last is None:
                    prev, seq = GENESIS, 0
                else:
                    tail = json.loads(last)
                    prev, seq = tail["hash"], tail["seq"] + 1
                event = {"seq": seq, "ts": utc_now(), "type": type_, "data": data or {},
                         "prev": prev}
                event["hash"] = event_hash(event)
                os.write(fd, canonical_json(event) + b"\n")
                os.fsync(fd)
                return event
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
