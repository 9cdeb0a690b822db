"""The host-side process record: what the agent's processes ran, seen from outside its sandbox.

`logs/processes.jsonl` is written by the runtime's process recorder (runtime/process_record.py)
while the agent runs, one JSON object a line, each with its `kind` (`ENTRY_TYPES`):

    recorder  a session began (each agent start; a resume adds one): its sampling interval, the
              agent's paths as its processes see them (`views`), what it can see (`note`)
    process   a process (or a new program image of one: an exec) first seen: pid, ppid, start
              time, argv, cwd and exe as the process sees them; `forked` when it is a fork of
              its parent running the same program (same executable, command line and auxiliary
              vector), `rewritten` when only its command line changed (setproctitle)
    code      code that process runs: a script named in its arguments, a module (`-m`), inline
              code (`-c`), its standard input, a local module its script imports, a start-up file
              (sitecustomize, .pth) or a compiled program of the agent's; `captured` says whether
              its bytes are kept (`file`: logs/processes/<sha256 of the kept bytes>), `sha256` is
              the content as read (before redaction), `why` says why it is not kept
    write     a process seen holding a file open for writing under the workspace's output folder
    end       a process no longer there (`gone`: the first sample without it)
    stopped   the session ended: samples taken, processes seen, the recorder's own CPU time, and
              the `problems` that make the record incomplete

The record lives under logs/ (append-only, sealed with the run: a2c.contracts.seal) and outside
the agent's reach. When a session stops, the runtime appends a `process_record` event
(a2c.contracts.events.ProcessRecorded) with the digest of the file as it then was, so the record
is also in the signed event chain; `verify_record` checks the file against those events.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .records import Record, optional, read_jsonl_tolerant

RECORD_FILE = "processes.jsonl"     # under logs/
FILES_DIR = "processes"             # under logs/: the kept bytes, by their sha256
EVENT_TYPE = "process_record"


def record_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / "logs" / RECORD_FILE


def files_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "logs" / FILES_DIR


@dataclass
class ProcessEntry(Record):
    KIND: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, **super().to_dict()}


@dataclass
class RecorderStarted(ProcessEntry):
    """A recorder session began (the agent started or resumed)."""

    KIND: ClassVar[str] = "recorder"
    at: float = 0.0
    session: int = 0
    interval_s: float = 0.0
    backend: str = ""  # the sandbox backend: local | docker
    isolation: str = ""
    views: dict[str, str] = field(default_factory=dict)
    note: str = ""


@dataclass
class ProcessSeen(ProcessEntry):
    """A process of the agent, or a new program image of one (`image` > 0 after an exec or a
    rewritten command line), at first sight."""

    KIND: ClassVar[str] = "process"
    pid: int = 0
    start: float = 0.0
    image: int = 0
    ppid: int = 0
    seen: float = 0.0
    argv: list[str] = field(default_factory=list)
    cwd: str | None = None
    exe: str | None = None
    uid: int | None = None
    parent_seen: bool = False
    argv_truncated: bool | None = optional()
    forked: bool | None = optional()      # a fork of its parent, the same program: no code of its own
    rewritten: bool | None = optional()   # its command line rewritten in place (setproctitle)


@dataclass
class CodeSeen(ProcessEntry):
    """Code a process runs, and whether its bytes are kept."""

    KIND: ClassVar[str] = "code"
    pid: int = 0
    start: float = 0.0
    image: int = 0
    how: str = ""              # script | module | inline | stdin | import | startup | argument | exe
    language: str = ""         # python | shell | other | binary
    path: str | None = None    # as the process sees it
    module: str | None = None
    captured: bool = False
    sha256: str | None = None  # of the content as read
    size: int | None = None
    file: str | None = None    # logs/processes/<sha256 of the kept, redacted bytes>
    why: str | None = None     # not captured: why
    agent_place: bool | None = None   # in a place the agent can write
    changed_after_start: bool | None = optional()
    redacted: bool | None = optional()
    by: str | None = optional()       # the file that imports it
    segments: list[list[Any]] | None = optional()   # unread: its code [[offset, size, sha256]]


@dataclass
class WriteSeen(ProcessEntry):
    """A process seen holding a file open for writing under the output folder."""

    KIND: ClassVar[str] = "write"
    pid: int = 0
    start: float = 0.0
    path: str = ""
    at: float = 0.0


@dataclass
class ProcessEnded(ProcessEntry):
    KIND: ClassVar[str] = "end"
    pid: int = 0
    start: float = 0.0
    last_seen: float = 0.0
    gone: float | None = None


@dataclass
class RecorderStopped(ProcessEntry):
    """A recorder session ended."""

    KIND: ClassVar[str] = "stopped"
    at: float = 0.0
    session: int = 0
    samples: int = 0
    processes: int = 0
    captured: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    max_sample_s: float = 0.0
    problems: list[str] = field(default_factory=list)


ENTRY_TYPES: dict[str, type[ProcessEntry]] = {cls.KIND: cls for cls in (
    RecorderStarted, ProcessSeen, CodeSeen, WriteSeen, ProcessEnded, RecorderStopped)}


class RecordWriter:
    """The recorder's one writer: lines appended to logs/processes.jsonl, kept bytes stored once
    each under logs/processes/ (0600 files, 0700 folders: the run's owner only)."""

    def __init__(self, run_dir: str | Path):
        self.path = record_path(run_dir)
        self.files = files_dir(run_dir)
        self.files.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(self, entry: ProcessEntry) -> None:
        os.write(self._fd, (json.dumps(entry.to_dict(), sort_keys=True, ensure_ascii=False)
                            + "\n").encode("utf-8", "surrogateescape"))

    def store(self, data: bytes) -> str:
        """Keep `data`; its path relative to the run directory (logs/processes/<sha256>)."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.files / digest
        if not target.exists():
            tmp = self.files / f".{digest}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        return f"logs/{FILES_DIR}/{digest}"

    def close(self) -> dict[str, Any]:
        """fsync and close; the file's digest now ({"sha256", "size"})."""
        os.fsync(self._fd)
        os.close(self._fd)
        return file_digest(self.path)


def file_digest(path: Path, limit: int | None = None) -> dict[str, Any]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while limit is None or size < limit:
            chunk = handle.read(1 << 20 if limit is None else min(1 << 20, limit - size))
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
    return {"sha256": digest.hexdigest(), "size": size}


def read_process_record(run_dir: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(entries, problems) of RUN/logs/processes.jsonl; no file: ([], [])."""
    rows, problems = read_jsonl_tolerant(record_path(run_dir))
    return ([r for r in rows if r.get("kind") in ENTRY_TYPES],
            [f"logs/{RECORD_FILE}:{line}: {why}" for line, why in problems])


def verify_record(run_dir: str | Path, events: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the record against its `process_record` events (the last one's digest
    must hold for the file's first `size` bytes; every kept file must hash to its name)."""
    path = record_path(run_dir)
    marks = [e.get("data") or {} for e in events if e.get("type") == EVENT_TYPE]
    problems: list[str] = []
    if not marks:
        return ["no process_record event holds the record's digest"] if path.exists() else []
    if not path.is_file():
        return [f"logs/{RECORD_FILE} is missing though {len(marks)} process_record event(s) "
                "name it"]
    last = marks[-1]
    size = int(last.get("size") or 0)
    if os.path.getsize(path) < size or file_digest(path, size)["sha256"] != last.get("sha256"):
        problems.append(f"logs/{RECORD_FILE} does not match its process_record event")
    folder = files_dir(run_dir)
    if folder.is_dir():
        for kept in sorted(folder.iterdir()):
            if kept.name.startswith("."):
                continue
            if file_digest(kept)["sha256"] != kept.name:
                problems.append(f"logs/{FILES_DIR}/{kept.name[:12]}... does not hash to its name")
    return problems
