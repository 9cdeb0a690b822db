"""Filesystem steps shared by everything that publishes a file or a folder: the one atomic
writer (JSON, text, bytes; fsync before rename; explicit mode), the durable append a journal
needs, the tail of a log for error messages, folder swaps, the builders' lock, and `KeyFile`: how
a secret's own file is read (private, or refused) and created (whole, once).

A folder is built beside its destination and swapped in with renames, so a reader sees either
the old folder or the complete new one, never a half-written one; builders that may race (two
runs preparing the same model, data set or baseline) take an exclusive `file_lock` first;
`staged_dir` is that build-beside-and-swap step.

Private by default under a run (`PRIVATE_FILE`, `PRIVATE_DIR`, `private_dir`, `private_run_dir`):
everything a command writes under a run directory — the report, the analysis layer, the results
— is 0600 in a 0700 folder, and the run directory itself 0700, so no other local user reads a
held-out prompt or a gold answer whichever command wrote it. The sandboxed agent and the
grader's evaluator reach what they need through bubblewrap's (or the container engine's) binds,
made by root, never through the host path.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.errors import A2CError

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def _owned(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid()


def private_dir(path: str | Path, *, ours: bool = False) -> Path:
    """`path` as a private folder: created 0700 (with its missing parents) and, when it exists
    and is ours, chmod'ed 0700. A symbolic link there is refused (nothing is written through
    one). `ours`: also refuse a folder another user owns, or one others could write in before
    we closed it; for folders whose names another local user can guess (a short socket folder
    under /tmp, a shared driver server's registry), where one made first would hand them what
    we put there."""
    path = Path(path)
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise A2CError(f"{path}: a symbolic link, not a folder (refusing to write through it)")
    if ours and not _owned(st):
        raise A2CError(f"{path}: made by uid {st.st_uid}, not by this user ({os.geteuid()}): "
                       "refusing to use a folder someone else made; remove it")
    if ours and st.st_mode & 0o022:
        raise A2CError(f"{path}: writable by others (mode {stat.S_IMODE(st.st_mode):o}), so "
                       "anything in it may be someone else's: refusing to use it; remove it")
    if _owned(st) and stat.S_IMODE(st.st_mode) != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR)
    return path


def private_run_dir(run_dir: str | Path) -> None:
    """A run directory closed to other local users (0700), when it is ours and not a symbolic
    link: what a later command writes under an older run (0711 then) is unreachable too."""
    try:
        st = os.lstat(run_dir)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and _owned(st) and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(run_dir, PRIVATE_DIR)


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


class KeyFileError(A2CError):
    """A key file that cannot be trusted (not a regular file, readable by others) or read."""


@dataclass(frozen=True)
class KeyFile:
    """A secret kept in one file of its own (a data key, a signing key, a token): the one way such
    a file is read and created, so every key gets the same checks.

    `read()` refuses a file that is not regular or that others may read or write (mode 0600 or
    stricter; a symlink is followed unless `nofollow`, and the mode checked is the file's own, so
    a mounted Secret works). `create(data)` writes the file whole or not at all: O_EXCL 0600
    under a private name, fsync'ed, then hard-linked into place, so two processes creating the
    same key at once agree on one (the loser's data is dropped, `False`). Its folder is made
    0700. `what` names the key in errors ("the data key").
    """

    path: Path
    what: str = "key"
    nofollow: bool = False

    def exists(self) -> bool:
        return os.path.lexists(self.path)

    def read(self) -> bytes:
        flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_NOFOLLOW if self.nofollow else 0)
        try:
            fd = os.open(self.path, flags)
        except OSError as exc:
            raise KeyFileError(f"{self.path}: cannot read {self.what}: {exc}") from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise KeyFileError(f"{self.path}: {self.what} is not a regular file")
            if st.st_mode & 0o077:
                raise KeyFileError(f"{self.path}: {self.what} is readable or writable by others "
                                   f"(mode {st.st_mode & 0o777:o}); chmod 600 it")
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def create(self, data: bytes) -> bool:
        """Create the file with `data`; False (and nothing written) when it exists already."""
        path = Path(self.path)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, path)          # atomic, and fails if another writer won
            return True
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def read_or_create(self, make: Callable[[], bytes]) -> bytes:
        """The key, created from `make()` first when there is none."""
        if not self.exists():
            self.create(make())
        return self.read()
