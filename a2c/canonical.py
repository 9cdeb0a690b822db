"""Canonical JSON and hashing: the one definition every hash in a2c is taken with.

Bundle digests, spec hashes, event chains and data fingerprints must agree across machines and
versions, so they all serialise through `canonical_json` (sorted keys, no whitespace, UTF-8).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: Any) -> str:
    return sha256_bytes(canonical_json(obj))


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_tree(root: str | Path, suffixes: tuple[str, ...] | None = None) -> str:
    """Content hash of a folder: every regular file's relative path and sha256, sorted.

    Used for model weights (identical weights are scored once) and data fingerprints. Symlinks are
    followed only if they stay inside `root`; `suffixes` restricts which files count.
    """
    root = Path(root).resolve()
    entries = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        resolved = path.resolve()
        if root not in resolved.parents:
            continue
        if suffixes and not path.name.endswith(suffixes):
            continue
        entries.append([path.relative_to(root).as_posix(), sha256_file(resolved)])
    return sha256_json(entries)
