"""Filesystem steps shared by everything that publishes a folder (bundles, models, data sets).

A folder is built beside its destination and swapped in with renames, so a reader sees either
the old folder or the complete new one, never a half-written one; builders that may race (two
runs preparing the same model, data set or baseline) take an exclusive `file_lock` first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


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
