"""The run record's spine: an append-only, hash-chained, signed `events.jsonl`, and its event
types.

Each event carries the hash of the one before it, so editing, inserting, reordering or deleting any
line breaks the chain at that line and `verify_events` names it. Each event also carries `key`
(the id of the operator's public signing key) and `sig`, an Ed25519 signature of its hash
(a2c.contracts.record_key): the private key lives outside the run directory, so whoever edits a
record and recomputes the plain hashes still cannot produce the signatures, and anyone with the
public key can check them. Records written before the signatures carry `mac` (HMAC-SHA256 under a
legacy key) instead; they verify with that key given explicitly. Appends are fsync'ed because
the record must survive a crash of the runtime at any point; the file is 0600. Each event type's
`data` is one payload class (`EVENT_TYPES`, a2c.contracts.event_payloads); the chain and its
check are a2c.contracts.event_chain. `EventLog.emit(payload)` writes one, `payload_of(event)`
reads one.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.timefmt import iso_utc

from .event_chain import GENESIS, ChainCheck, event_hash, verify_events
from .event_payloads import (  # re-exported: the writers name the payloads beside EventLog
    EVENT_TYPES,
    AgentExited,
    AgentStarted,
    BaselineScored,
    BudgetWarning,
    DeadlineReached,
    DriverBudgetExhausted,
    DriverCall,
    Event,
    EventPayload,
    FinalScored,
    ProcessRecorded,
    RecordSealed,
    RunFinished,
    RunResumed,
    RunStarted,
    Snapshot,
    SubmissionPruned,
    SubmissionReceived,
    SubmissionScored,
    payload_of,
)
from .record_key import SigningKey, operator_key
from .records import read_jsonl_tolerant

__all__ = ["GENESIS", "ChainCheck", "event_hash", "verify_events", "EVENT_TYPES",
           "AgentExited", "AgentStarted", "BaselineScored", "BudgetWarning",
           "DeadlineReached", "DriverBudgetExhausted", "DriverCall", "Event",
           "EventPayload", "FinalScored", "ProcessRecorded", "RecordSealed",
           "RunFinished", "RunResumed", "RunStarted", "Snapshot", "SubmissionPruned",
           "SubmissionReceived", "SubmissionScored", "payload_of", "EVENTS_FILE",
           "utc_now", "read_events", "first_non_canonical_line", "read_events_tolerant",
           "EventLog"]

EVENTS_FILE = "events.jsonl"


def utc_now() -> str:
    return iso_utc(time.time())


# ----------------------------------------------------------------------------- reading
def read_events(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def first_non_canonical_line(path: str | Path, stop: int | None = None) -> int | None:
    """The first line (1-based, before line `stop`) not in the canonical form `EventLog`
    writes (an event edited by hand), or None; reading stops at a line that is not JSON."""
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if stop is not None and lineno >= stop:
                return None
            try:
                canonical = canonical_json(json.loads(raw)) + b"\n"
            except ValueError:
                return None
            if raw != canonical:
                return lineno
    return None


def read_events_tolerant(run_dir_or_path: str | Path
                         ) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """(events, [(line, problem)]) of a run directory's events.jsonl (or the file itself), each
    event with its 1-based `_line`; a line that is not a JSON object is reported, not fatal (the
    analysis reads a damaged record to report on it). ([], []) without the file."""
    path = Path(run_dir_or_path)
    if path.is_dir():
        path = path / EVENTS_FILE
    return read_jsonl_tolerant(path)


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
    Every event is signed with `key` (default: the operator's signing key, created on first use);
    appending to a chain begun under another key (or a legacy HMAC chain) is refused.
    """

    def __init__(self, path: str | Path, verify: bool = True, key: SigningKey | None = None):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._key = key
        if verify and self.path.exists() and self.path.stat().st_size:
            check = verify_events(self.path, self.key)
            if not check.ok:
                raise ValueError(f"{self.path}:{check.bad_line}: {check.reason}; refusing to append")

    @property
    def key(self) -> SigningKey:
        if self._key is None:
            self._key = operator_key()
        return self._key

    def emit(self, payload: EventPayload) -> dict[str, Any]:
        """Append one typed event."""
        return self.append(payload.TYPE, payload.to_dict())

    def append(self, type_: str, data: dict[str, Any] | EventPayload | None = None
               ) -> dict[str, Any]:
        if isinstance(data, EventPayload):
            data = data.to_dict()
        key = self.key
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                last = _last_line(fd)
                if last is None:
                    prev, seq = GENESIS, 0
                else:
                    tail = json.loads(last)
                    prev, seq = tail["hash"], tail["seq"] + 1
                    if tail.get("key") != key.id or "sig" not in tail:
                        under = "legacy HMAC key" if "mac" in tail else "record key"
                        raise ValueError(f"{self.path}: the chain is under {under} "
                                         f"{tail.get('key')!r}, this writer holds {key.id}; "
                                         "refusing to append")
                event = {"seq": seq, "ts": utc_now(), "type": type_, "data": data or {},
                         "prev": prev, "key": key.id}
                event["hash"] = event_hash(event)
                event["sig"] = key.sign(event["hash"])
                os.write(fd, canonical_json(event) + b"\n")
                os.fsync(fd)
                return event
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
