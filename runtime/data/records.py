"""Records on disk: JSON lines in and out, and the fingerprint of a list of records."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from a2c.canonical import canonical_json, sha256_bytes
from a2c.fsutil import write_bytes_atomic

from .generators import DataError


def fingerprint(records: Iterable[dict]) -> str:
    """sha256 of the records as canonical JSON lines (order matters)."""
    return sha256_bytes(b"".join(canonical_json(r) + b"\n" for r in records))


def write_jsonl(path: str | Path, records: Iterable[dict]) -> Path:
    """Write one JSON object per line (sorted keys, UTF-8), atomically (a2c.fsutil)."""
    payload = "".join(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n"
                      for record in records)
    # 0o600 as before (the file used to keep mkstemp's mode): held-out records stay private.
    return write_bytes_atomic(path, payload.encode("utf-8"), mode=0o600)


def read_jsonl(path: str | Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as exc:
                    raise DataError(f"{path}:{n}: not valid JSON: {exc}") from None
    return out
