"""The run record's spine: an append-only, hash-chained `events.jsonl`.

Each event carries the hash of the one before it, so editing, inserting, reordering or deleting any
line breaks the chain at that line and `verify_events` names it. Appends are fsync'ed because the
record must survive a crash of the runtime at any point.
"""

from __future__ import annotations

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


class EventLog:
    """Appends chained events to `events.jsonl`; reopening continues the chain (for --resume).

    Thread-safe within one process. Only one process may write a given log: the runtime.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._prev = GENESIS
        self._seq = 0
        if self.path.exists() and self.path.stat().st_size:
            check = verify_events(self.path)
            if not check.ok:
                raise ValueError(f"{self.path}:{check.bad_line}: {check.reason}; refusing to append")
            last = read_events(self.path)[-1]
            self._prev, self._seq = last["hash"], last["seq"] + 1

    def append(self, type_: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        with self._lock:
            event = {"seq": self._seq, "ts": utc_now(), "type": type_, "data": data or {},
                     "prev": self._prev}
            event["hash"] = event_hash(event)
            line = canonical_json(event) + b"\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._prev, self._seq = event["hash"], self._seq + 1
            return event
