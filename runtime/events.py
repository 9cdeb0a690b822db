"""The run record's spine: an append-only, hash-chained `events.jsonl`.

Each event carries the hash of the one before it, so editing, inserting, reordering or deleting any
line breaks the chain at that line and `verify_events` names it. Appends are fsync'ed because the
record must survive a crash of the runtime at any point.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json, sha256_bytes

GENESIS = "0" * 64


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def event_hash(event: dict[str, Any]) -> str:
    body = {k: v for k, v in event.items() if k != "hash"}
    return sha256_bytes(canonical_json(body))


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

    def append(self, type_: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
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
