"""Filesystem steps shared by everything that publishes a file or a folder: the one atomic
writer (JSON, text, bytes; fsync before rename; explicit mode), the durable append a journal
needs, the tail of a log for error messages, folder swaps and the builders' lock.

A folder is built beside its destination and swapped in with renames, so a reader sees either
the old folder or the complete new one, never a half-written one; builders that may race (two
runs preparing the same model, data set or baseline) take an exclusive `file_lock` first;
`staged_dir` is that build-beside-and-swap step.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `path` (created, with its folder, if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def swap_in_dir(new: Path, dest: Path) -> None:
    """Put the finished folder `new` at `dest` (same filesystem), replacing any folder there."""
    old = None
    if dest.exists():
        old = dest.parent / f".{dest.name}.old-{os.getpid()}"
        if old.exists():
            shutil.rmtree(old)
        os.replace(dest, old)
    os.replace(new, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_bytes_atomic(path: str | Path, data: bytes, *, mode: int = 0o644) -> Path:
    """Write `data` to `path` so a reader (or a crash) sees the old file or the new one, whole.

    The bytes are fsync'ed before the rename; `mode` is set on the new file (run records that
    hold held-out items or tokens pass 0o600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def write_json_atomic(path: str | Path, data: Any, *, canonical: bool = False,
                      mode: int = 0o644) -> Path:
    """JSON through `write_bytes_atomic`: indented and sorted for people by default, or the
    canonical one-line form (`a2c.canonical`) where bytes are hashed or compared."""
    if canonical:
        payload = canonical_json(data) + b"\n"
    else:
        payload = (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    return write_bytes_atomic(path, payload, mode=mode)


def write_text_atomic(path: str | Path, text: str, *, mode: int = 0o644) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"), mode=mode)


def append_durable(path: str | Path, data: bytes, *, mode: int = 0o600) -> None:
    """Append `data` and fsync before returning: what a journal acknowledges survives a crash.
    A new file is created with `mode` (0600: journals and logs are the operator's)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_tail(path: str | Path | None, limit: int = 2000) -> str:
    """The last `limit` characters of a text file ('' when it is missing), for error messages."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 4 * limit))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:]


@contextlib.contextmanager
def staged_dir(dest: str | Path) -> Iterator[Path]:
    """Build a folder that replaces `dest` whole: yields a fresh temporary folder beside `dest`
    (same filesystem); when the block ends normally it is swapped in (`swap_in_dir`), and on any
    exception it is removed, so `dest` is the old folder or the complete new one."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        yield tmp
        swap_in_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
