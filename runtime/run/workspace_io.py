"""File operations on paths the agent controls (its workspace, its output folder, its transcript).

The agent can put anything at any name it can write: a symlink to the grader's files, a FIFO, a
device, a 20 GiB file, a directory where a file is expected. The runtime therefore never reads a
workspace file back to decide anything, and every operation here

- opens the folder itself once with O_DIRECTORY|O_NOFOLLOW and works relative to that fd, so a
  folder swapped for a symlink is refused, not followed;
- writes through a fresh temporary name (O_CREAT|O_EXCL|O_NOFOLLOW) renamed over the target:
  rename replaces whatever the agent left at the name (a symlink is replaced, never followed);
- reads only regular files (O_NOFOLLOW|O_NONBLOCK, then fstat: a FIFO or device never blocks),
  up to a size limit, and walks folders with `os.fwalk` (fd-relative, symlinks not followed) under
  a file-count and byte budget.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from a2c.fsutil import write_bytes_atomic

NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class UnsafePath(OSError):
    """The path is not what the runtime may touch (a symlink, a FIFO, too big...)."""


def open_dir(path: str | Path, dir_fd: int | None = None) -> int:
    """An fd for the folder `path` itself; a symlink there raises (ELOOP/ENOTDIR)."""
    return os.open(path, NOFOLLOW_DIR, dir_fd=dir_fd)


def write_file(folder: str | Path, name: str, data: bytes, mode: int = 0o644) -> None:
    """Atomically put `data` at folder/name, replacing whatever is there (never following it)."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    dfd = open_dir(folder)
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=dfd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            # The agent made `name` a non-empty directory: take it out of the way, then retry.
            os.rename(name, f".{name}.{secrets.token_hex(6)}.moved", src_dir_fd=dfd,
                      dst_dir_fd=dfd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    finally:
        os.close(dfd)


def read_regular(path: str | Path, limit: int, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file (not followed if a symlink), at most `limit` of them, or
    UnsafePath. Never blocks on a FIFO or a device."""
    fd = os.open(path, READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path}: not a regular file")
        if st.st_size > limit:
            raise UnsafePath(f"{path}: {st.st_size} bytes, over the limit of {limit}")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise UnsafePath(f"{path}: grew over the limit of {limit} bytes")
        return data
    finally:
        os.close(fd)


def copy_out(src_root: str | Path, rel: str, dst: str | Path, *, max_files: int = 10_000,
             max_bytes: int = 256 << 20, transform: Callable[[bytes], bytes] | None = None
             ) -> dict:
    """Copy workspace-relative `rel` (a file or a folder) to `dst` (runtime-owned): regular
    files only, symlinks and special files skipped, within the budgets. Returns counts."""
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    if not parts or ".." in parts or Path(rel).is_absolute():
        raise UnsafePath(f"{rel}: not a workspace-relative path")
    dst = Path(dst)
    report = {"files": 0, "bytes": 0, "skipped": 0}
    fd = open_dir(src_root)
    try:
        for part in parts[:-1]:               # every folder on the way: opened, never followed
            nxt = open_dir(part, dir_fd=fd)
            os.close(fd)
            fd = nxt
        name = parts[-1]
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode):
            data = read_regular(name, max_bytes, dir_fd=fd)
            dst.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(dst, transform(data) if transform else data, mode=0o600)
            report.update(files=1, bytes=len(data))
            return report
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{rel}: not a regular file or folder")
        top = open_dir(name, dir_fd=fd)
        try:
            for dirpath, _dirs, files, dfd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
                out_dir = dst / dirpath
                out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                for fname in sorted(files):
                    if report["files"] >= max_files or report["bytes"] >= max_bytes:
                        report["skipped"] += 1
                        continue
                    try:
                        data = read_regular(fname, max_bytes - report["bytes"], dir_fd=dfd)
                    except OSError:
                        report["skipped"] += 1
                        continue
                    write_bytes_atomic(out_dir / fname, transform(data) if transform else data,
                                       mode=0o600)
                    report["files"] += 1
                    report["bytes"] += len(data)
        finally:
            os.close(top)
        return report
    finally:
        os.close(fd)
