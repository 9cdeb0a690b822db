"""The seal of a run record: digests of every file a report or leaderboard reads, written into the
authenticated event chain (`record_sealed`, a2c.contracts.events) and checked by `a2c verify`.

Sealed (paths relative to the run directory; `SEALED_FILES`, `SEALED_DIRS`, `SEALED_TREES`):
  run.json, submissions.jsonl, agent/prompt.rendered.md, every file under results/ and logs/,
  and data/ (the agent split and its referenced files, which may be many) as one tree entry.

Each file is recorded as {"sha256", "size"} (a symbolic link as {"symlink": target}); a tree as
`"data/": {"tree": sha256 of its sorted "path sha256 size" lines, "files": count}`. Logs only grow:
an earlier seal of a file under logs/ must still hold for its first `size` bytes, so a truncated
or rewritten log fails even against a seal made before the last one. The last event of a
finished (or failed) run is its seal; files in the sealed folders that the seal does not name
fail too (a results file added later).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

SEALED_FILES = ("run.json", "submissions.jsonl", "agent/prompt.rendered.md")
SEALED_DIRS = ("results", "logs")
SEALED_TREES = ("data",)
APPEND_ONLY_DIRS = ("logs",)
SEAL_TYPE = "record_sealed"


def _digest(path: Path, limit: int | None = None) -> dict[str, Any]:
    if path.is_symlink():
        return {"symlink": os.readlink(path)}
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while limit is None or size < limit:
            want = 1 << 20 if limit is None else min(1 << 20, limit - size)
            chunk = handle.read(want)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
    return {"sha256": digest.hexdigest(), "size": size}


def _files_under(root: Path, top: str) -> list[str]:
    found: list[str] = []
    base = root / top
    if base.is_symlink() or not base.is_dir():
        return found
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in filenames + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
            found.append(Path(dirpath, name).relative_to(root).as_posix())
    return found


def sealed_paths(run_dir: str | Path) -> list[str]:
    """The sealed entries that exist now (relative, sorted; a tree as "data/")."""
    root = Path(run_dir)
    found = [rel for rel in SEALED_FILES if (root / rel).is_file() or (root / rel).is_symlink()]
    for top in SEALED_DIRS:
        found += _files_under(root, top)
    found += [f"{top}/" for top in SEALED_TREES if (root / top).exists()]
    return sorted(set(found))


def _entry(root: Path, rel: str) -> dict[str, Any]:
    if not rel.endswith("/"):
        return _digest(root / rel)
    if (root / rel).is_symlink():
        return {"symlink": os.readlink(root / rel.rstrip("/"))}
    lines = []
    files = sorted(_files_under(root, rel.rstrip("/")))
    for path in files:
        d = _digest(root / path)
        lines.append(f"{path} {d.get('sha256') or 'symlink:' + d['symlink']} {d.get('size', 0)}")
    tree = hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()
    return {"tree": tree, "files": len(files)}


def record_digests(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """{relative path: digest} of every sealed entry of `run_dir` (the `record_sealed` payload)."""
    root = Path(run_dir)
    return {rel: _entry(root, rel) for rel in sealed_paths(root)}


def _append_only(rel: str) -> bool:
    return rel.split("/", 1)[0] in APPEND_ONLY_DIRS


def check_seals(run_dir: str | Path, events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(file, problem) for every way the files differ from the seals in `events` (the parsed,
    chain-verified events): the last event must be a seal; every file it names must match it,
    every sealed file must be named; earlier seals must hold for the logs' first bytes."""
    root = Path(run_dir)
    seals = [e for e in events if e.get("type") == SEAL_TYPE]
    if not events:
        return []
    if not seals:
        return [("events.jsonl", "the record is not sealed (no record_sealed event: the run "
                                 "has not ended, the runtime crashed, or the seal was cut off)")]
    if events[-1].get("type") != SEAL_TYPE:
        return [("events.jsonl", f"{len(events) - events.index(seals[-1]) - 1} event(s) after "
                                 "the last record_sealed event (the record changed after it "
                                 "was sealed)")]
    problems: list[tuple[str, str]] = []
    last = (seals[-1].get("data") or {}).get("files") or {}
    for rel in sorted(last):
        want = last[rel]
        path = root / rel
        if not (path.exists() or path.is_symlink()):
            problems.append((rel, "missing, but the record's seal names it"))
            continue
        have = _entry(root, rel)
        if have != want:
            problems.append((rel, _differs(want, have)))
    for rel in sealed_paths(root):
        if rel not in last:
            problems.append((rel, "not in the record's seal (added after the run was sealed)"))
    for seal in seals[:-1]:
        for rel, want in ((seal.get("data") or {}).get("files") or {}).items():
            if not _append_only(rel) or "size" not in want or not (root / rel).is_file():
                continue
            have = _digest(root / rel, limit=int(want["size"]))
            if have != want:
                problems.append((rel, f"its first {want['size']} bytes differ from the seal at "
                                      f"line {seal.get('_line', '?')} (a log only grows: "
                                      "truncated or rewritten)"))
    return problems


def _differs(want: dict[str, Any], have: dict[str, Any]) -> str:
    if "tree" in want or "tree" in have:
        return (f"changed after the run was sealed ({have.get('files')} files, sealed with "
                f"{want.get('files')}; a file was added, removed or edited)")
    if "symlink" in want or "symlink" in have:
        return f"is {have} but was sealed as {want}"
    if have.get("size") != want.get("size"):
        return (f"changed after the run was sealed ({have.get('size')} bytes, sealed at "
                f"{want.get('size')})")
    return "changed after the run was sealed (same size, different sha256)"
