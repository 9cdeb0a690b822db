"""Filesystem steps shared by everything that publishes a folder (bundles, models, data sets).

A folder is built beside its destination and swapped in with renames, so a reader sees either
the old folder or the complete new one, never a half-written one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


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
