#!/usr/bin/env python
"""What the disk budget's watcher costs (runtime/sandbox/disk.py): one scan of a workspace of N
files, in CPU seconds of the runtime and wall seconds, and what that means per minute of a run.

    .venv/bin/python benchmarks/bench_disk_watch.py [--files 10000 100000] [--per-dir 100] [--n 10]

For each N: a folder of N files of 4 KiB (N / per-dir folders), a few MB of it in larger files,
then `--n` scans (`disk.measure`, the walk with os.scandir and one lstat per entry, plus the
/proc fd check of this process), the first dropped (it warms the dentry cache, as the watcher's
earlier scans do). Prints the median and the worst, and the CPU share of one core the watcher
takes at its shortest interval (2 s, an agent close to its budget) and its longest (15 s, one
far below it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path


def make_tree(root: Path, files: int, per_dir: int) -> None:
    block = b"x" * 4096
    for n in range(files):
        folder = root / f"d{n // per_dir:05d}"
        if n % per_dir == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n:07d}.txt").write_bytes(block)


def main(argv: list[str] | None = None) -> int:
    from a2c.runtime.sandbox.disk import EVERY_S, MAX_EVERY_S, format_size, measure
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--per-dir", type=int, default=100)
    parser.add_argument("--n", type=int, default=10)
    args = parser.parse_args(argv)
    print(f"{'files':>8} {'size':>7} {'cpu ms (median/worst)':>22} {'wall ms':>8} "
          f"{'core @2s':>9} {'core @15s':>9}")
    for files in args.files:
        root = Path(tempfile.mkdtemp(prefix="a2c-diskwatch-"))
        try:
            make_tree(root / "workspace", files, args.per_dir)
            parts = {"workspace": [root / "workspace"]}
            scans = [measure(parts, [os.getpid()]) for _ in range(args.n + 1)][1:]
            cpu = [s.cpu_s for s in scans]
            wall = [s.wall_s for s in scans]
            med = statistics.median(cpu)
            print(f"{files:>8} {format_size(scans[-1].bytes):>7} "
                  f"{med * 1e3:>10.1f} / {max(cpu) * 1e3:<9.1f} "
                  f"{statistics.median(wall) * 1e3:>8.1f} "
                  f"{med / EVERY_S:>8.2%} {med / MAX_EVERY_S:>9.2%}")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
