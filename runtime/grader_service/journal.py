"""The grading service's journal, `submissions.jsonl` (append durable; a torn last line left by a
crash is dropped), and `read_journal`, its plain reader."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.runtime.grader_service.common import log
from a2c.runtime.run.paths import RunPaths


class Journal:
    """Append-only JSON lines with fsync; tolerant of a torn last line left by a crash."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._repair()

    def _repair(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            # A write torn by a crash was never acknowledged: drop it.
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as handle:
                handle.truncate(cut)
                handle.flush()
                os.fsync(handle.fileno())
            log(f"journal: dropped a torn last line ({len(data) - cut} bytes)")

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = []
        with open(self.path, encoding="utf-8") as handle:
            for n, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    log(f"journal: line {n} is not JSON; skipped")
        return lines

    def append(self, entry: dict[str, Any]) -> None:
        data = canonical_json(entry) + b"\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)



def read_journal(run_dir: str | Path) -> list[dict[str, Any]]:
    path = RunPaths(Path(run_dir)).journal
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
