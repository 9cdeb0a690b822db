"""`export.json`, the manifest of a public export (analysis/export.py writes it, signs it and
analysis/export_verify.py checks a folder against it): the record it was made of
(`record_head`), every file it holds with its digest, the files withheld or rewritten with the
digest the record's seal gives them, and the snapshot commits the bundle rewrote.

Typed here so that its writer and its reader agree on one set of fields, in the order the file
has always held them; the signature (`sig`) is over its canonical JSON without `sig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2c.contracts.records import Record, optional

EXPORT_FORMAT = "a2c-export/2"


@dataclass
class SnapshotBundle:
    """What bundling the snapshots gave (analysis/export_snapshots.py): whether a bundle was
    written, why not when git failed, the commits it rewrote {recorded: bundled} and the files
    it left out {path: why}."""

    bundled: bool = False
    why: str | None = None
    commits: dict[str, str] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FileDigest(Record):
    """A file's digest as the manifest gives it (`files`): its SHA-256 and size in bytes."""

    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class FileClaim(Record):
    """Why a file is withheld or rewritten, and the digest the record's seal gives it."""

    reason: str | None = None
    sealed: Any = None


@dataclass
class ExportManifest(Record):
    format: str | None = None                   # EXPORT_FORMAT when written by this a2c
    run_id: str | None = None
    record_head: str | None = None              # the hash of events.jsonl's last event
    files: dict[str, Any] = field(default_factory=dict)       # path -> {sha256, size}
    withheld: dict[str, Any] = field(default_factory=dict)    # path -> {reason, sealed}
    rewritten: dict[str, Any] = field(default_factory=dict)   # path -> {reason, sealed, ...}
    host_paths_kept: dict[str, Any] = field(default_factory=dict)
    snapshots: str | bool = False               # the bundle's name, or False
    snapshot_commits: dict[str, str] = field(default_factory=dict)
    snapshot_files_left_out: dict[str, str] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)
    key: str | None = None                      # the id of the key that signed it
    sig: str | None = optional()
