"""The agent's disk budget (`budget.disk`): what it wrote, measured from the host, and the stop
past the budget. Both backends run the same watcher.

Why a watcher and not a quota: ext4 without project quotas has no per-folder limit, and docker's
`--storage-opt size=` bounds only a container's writable root layer (overlay2 on xfs with
`pquota`), while the agent's container has a read-only root and writes only into bind mounts of
host folders. So the runtime measures, from the host, everything the agent can write:

- its workspace (the output folder's checkpoints included), its /tmp (RUN/agent-tmp) and its
  home (RUN/agent-home): a walk with `os.scandir`, `st_blocks` (what the files take on disk, not
  their apparent size: a sparse file costs what it holds), a file with several links once;
- the files it writes through the runtime: logs/agent.log (its stdout), logs/commands.log, and
  docker's own copy of its stdout (the container's json log);
- files it still holds open after deleting them (`/proc/<pid>/fd` of its processes: a link
  count of 0 on one of those folders' filesystems), which no walk would see.

Past the budget the watcher stops the agent's whole tree (the backend's `stop`) and names why:
`disk budget exceeded: 61.4M of 50M (workspace 61.3M, /tmp 0.1M)`. The grader's copies of the
submissions (RUN/grader/submissions) are the runtime's, not the agent's, and do not count.

Incremental in time: a scan costs one `lstat` per file (10,000 files: ~30 ms of one core,
benchmarks/bench_disk_watch.py), so the next scan waits as long as the room left allows at
`ASSUMED_RATE` (2 GiB/s, or twice the fastest growth seen), between `EVERY_S` (2 s) and
`MAX_EVERY_S` (15 s): an agent far below the budget is measured every 15 s, one close to it
every 2 s, and one writing no faster than the assumed rate passes the budget by at most 2 s of
writing. Between scans, every 2 s, one `statvfs` per filesystem: when the used space grew by the
room left, the scan comes at once (a burst faster than the assumed rate). A /tmp that is a tmpfs (a spec without RUN/agent-tmp) is bounded by the kernel instead,
at its size (`tmpfs_size`).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

EVERY_S = 2.0                   # the shortest wait between two scans
MAX_EVERY_S = 15.0              # the longest
ASSUMED_RATE = 2 * 1024 ** 3    # bytes/s the agent is assumed able to write (a fast NVMe disk)
TMPFS_CAP = 8 * 1024 ** 3       # a tmpfs /tmp holds at most this (it is memory)
UNITS = ("", "K", "M", "G", "T", "P")


def format_size(size: int | float) -> str:
    """Bytes in the spec's binary units, as short as they read: 50M, 61.4M, 3.1G, 200G."""
    value, unit = float(size), 0
    while value >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    text = f"{value:.1f}".removesuffix(".0")
    return f"{text}{UNITS[unit]}" if unit else f"{int(size)}B"


def tmpfs_size(limit: int | None) -> int:
    """The size of a tmpfs /tmp under a disk budget of `limit` bytes (None: none): the budget,
    at most TMPFS_CAP (a tmpfs is memory; docker's was 8g before the budget)."""
    return min(limit, TMPFS_CAP) if limit else TMPFS_CAP


@dataclass
class Usage:
    """What one scan found: bytes on disk in all, and per part (workspace, /tmp, home, logs,
    open deleted files)."""

    bytes: int = 0
    parts: dict[str, int] = field(default_factory=dict)
    files: int = 0
    dirs: int = 0
    unreadable: int = 0          # folders the walk could not list (counted as empty)
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def words(self) -> str:
        """`workspace 61.3M, /tmp 0.1M`: the parts that hold anything, largest first."""
        parts = sorted(((n, b) for n, b in self.parts.items() if b > 0), key=lambda p: -p[1])
        return ", ".join(f"{name} {format_size(size)}" for name, size in parts)


def _walk(root: str, seen: set[tuple[int, int]], usage: Usage) -> int:
    """Bytes on disk under `root` (itself included), without following a symlink; a file with
    several links counted once across the whole scan (`seen`)."""
    try:
        top = os.lstat(root)
    except OSError:
        return 0
    total = top.st_blocks * 512
    if not stat.S_ISDIR(top.st_mode):
        return total
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:      # gone between the listing and the stat
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        usage.dirs += 1
                        stack.append(entry.path)
                    else:
                        usage.files += 1
                        if st.st_nlink > 1:
                            key = (st.st_dev, st.st_ino)
                            if key in seen:
                                continue
                            seen.add(key)
                    total += st.st_blocks * 512
        except PermissionError:
            if _open_up(path):            # the runtime's own uid: an agent's chmod 000
                stack.append(path)
            else:
                usage.unreadable += 1
        except OSError:
            continue
    return total


def _open_up(path: str) -> bool:
    """Make a folder the runtime owns listable again (u+rx), once; False when it cannot."""
    try:
        st = os.lstat(path)
        if st.st_uid != os.geteuid() or st.st_mode & 0o500 == 0o500:
            return False
        os.chmod(path, stat.S_IMODE(st.st_mode) | 0o500)
        return True
    except OSError:
        return False


def open_deleted(pids: Iterable[int], devices: set[int], seen: set[tuple[int, int]]) -> int:
    """Bytes of regular files the processes `pids` hold open after their last link went, on the
    filesystems `devices` (the agent's folders'): written, then hidden from any walk."""
    total = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if st.st_nlink == 0 and stat.S_ISREG(st.st_mode) and st.st_dev in devices:
                key = (st.st_dev, st.st_ino)
                if key not in seen:
                    seen.add(key)
                    total += st.st_blocks * 512
    return total


def measure(parts: dict[str, list[Path]], pids: Iterable[int] = ()) -> Usage:
    """One scan: bytes on disk of every path of each part (a folder walked, a file as is), and
    of the files `pids` hold open deleted on those paths' filesystems."""
    start, cpu = time.monotonic(), time.thread_time()
    usage, seen, devices = Usage(), set(), set()
    for name, paths in parts.items():
        size = 0
        for path in paths:
            try:
                devices.add(os.lstat(path).st_dev)
            except OSError:
                continue
            size += _walk(str(path), seen, usage)
        usage.parts[name] = size
    hidden = open_deleted(pids, devices, seen) if devices else 0
    if hidden:
        usage.parts["open deleted files"] = hidden
    usage.bytes = sum(usage.parts.values())
    usage.wall_s, usage.cpu_s = time.monotonic() - start, time.thread_time() - cpu
    return usage


def filesystems_used(parts: dict[str, list[Path]]) -> int:
    """Bytes used on the filesystems that hold `parts` (each counted once): O(1), for the trigger
    between scans (it rises at least as fast as the agent writes, unless others free space)."""
    total, seen = 0, set()
    for paths in parts.values():
        for path in paths:
            try:
                dev = os.lstat(path).st_dev
                if dev in seen:
                    continue
                seen.add(dev)
                st = os.statvfs(path)
            except OSError:
                continue
            total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total


def watched_parts(workspace: Path, agent_tmp: Path | None = None, agent_home: Path | None = None,
                  files: Iterable[Path | None] = ()) -> dict[str, list[Path]]:
    """What the agent can write, by part; a folder inside another (a home in the workspace,
    unconfined) is walked once, with the outer one."""
    folders = {"workspace": workspace, "/tmp": agent_tmp, "home": agent_home}
    out: dict[str, list[Path]] = {}
    kept: list[Path] = []
    for name, folder in folders.items():
        if folder is None:
            continue
        resolved = Path(folder).resolve()
        if any(resolved == k or k in resolved.parents for k in kept):
            continue
        kept.append(resolved)
        out[name] = [Path(folder)]
    logs = [Path(f) for f in files if f]
    logs = [f for f in logs if not any(k in f.resolve().parents for k in kept)]
    if logs:
        out["logs"] = logs
    return out


class DiskWatcher:
    """A thread that measures the agent's writable places and, past `limit` bytes, calls
    `stop()` (the backend's: the whole tree, SIGTERM then SIGKILL) once.

        watcher = DiskWatcher(parts, limit, stop, pids=lambda: {...})
        watcher.start()
        watcher.fired / watcher.stopped   # threading.Events: the stop began / ended
        watcher.cause                     # "disk budget exceeded: 61.4M of 50M (...)"
        watcher.record                    # run.json limits.disk: {asked, enforced, how, peak}
        watcher.cancel()                  # the agent ended first (finish(): and a last scan)
    """

    def __init__(self, parts: dict[str, list[Path]], limit: int, stop: Callable[[], dict],
                 pids: Callable[[], Iterable[int]] | None = None, every: float = EVERY_S,
                 max_every: float = MAX_EVERY_S, rate: float = ASSUMED_RATE):
        self.parts = parts
        self.limit = int(limit)
        self.asked = format_size(self.limit)
        self._stop = stop
        self._pids = pids or (lambda: ())
        self.every, self.max_every, self.rate = every, max_every, rate
        self.fired = threading.Event()
        self.stopped = threading.Event()
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self.cause: str | None = None
        self.report: dict | None = None
        self.last: Usage | None = None
        self.scans = 0
        self.cpu_s = 0.0
        self.record: dict = {"asked": self.asked, "enforced": True,
                             "how": "measured from the host every "
                                    f"{every:g}-{max_every:g} s: " + ", ".join(parts)}
        self._thread = threading.Thread(target=self._run, name="a2c-disk", daemon=True)

    def start(self) -> DiskWatcher:
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._cancelled.set()

    def finish(self) -> None:
        """The agent ended: no more scans, and one last one for the record (`used_at_end`),
        unless the watcher stopped it (its cause says what it found)."""
        self.cancel()
        if self.fired.is_set() or "used_at_end" in self.record:
            return
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)
        self.record["used_at_end"] = format_size(self.scan().bytes)

    def scan(self) -> Usage:
        try:
            pids = list(self._pids())
        except Exception:  # noqa: BLE001 - the processes cannot be listed: the walk still counts
            pids = []
        usage = measure(self.parts, pids)
        self.scans += 1
        self.cpu_s += usage.cpu_s
        self.last = usage
        peak = max(usage.bytes, self.record.get("peak_bytes", 0))
        self.record.update(peak_bytes=peak, peak=format_size(peak), scans=self.scans,
                           scan_cpu_s=round(self.cpu_s, 3))
        return usage

    def next_wait(self, usage: Usage, rate: float) -> float:
        """Seconds until the next scan: the room left at `rate`, within [every, max_every]."""
        room = max(0, self.limit - usage.bytes)
        return min(self.max_every, max(self.every, room / max(rate, 1.0)))

    def _run(self) -> None:
        before: tuple[float, int] | None = None
        rate = self.rate
        while not self._cancelled.is_set():
            usage = self.scan()
            now = time.monotonic()
            if usage.bytes > self.limit:
                self.fire(usage)
                return
            if before is not None and now > before[0]:
                rate = max(rate, 2 * (usage.bytes - before[1]) / (now - before[0]))
            before = (now, usage.bytes)
            # until the next scan, every `every` s: the filesystems' used space (one statvfs
            # each) grown by the room left means a scan now, however fast the writes came
            due, used = now + self.next_wait(usage, rate), filesystems_used(self.parts)
            room = self.limit - usage.bytes
            while not self._cancelled.wait(min(self.every, max(0.0, due - time.monotonic()))):
                if time.monotonic() >= due or filesystems_used(self.parts) - used >= room:
                    break

    def fire(self, usage: Usage) -> None:
        """Stop the agent (once) and say why."""
        with self._lock:
            if self.fired.is_set() or self._cancelled.is_set():
                return
            self.cause = (f"disk budget exceeded: {format_size(usage.bytes)} of {self.asked}"
                          + (f" ({usage.words()})" if usage.words() else ""))
            self.record["exceeded"] = self.cause
            self.fired.set()
        try:
            self.report = self._stop()
        except Exception as exc:  # noqa: BLE001 - the report says it; the run still ends
            self.report = {"error": f"{type(exc).__name__}: {exc}", "survivors": None}
        finally:
            self.stopped.set()

    def wait_stopped(self, timeout: float | None = 60) -> dict | None:
        """The stop's report once the tree is gone (None when the watcher never fired)."""
        if not self.fired.is_set():
            return None
        if threading.current_thread() is not self._thread:   # not from inside its own stop
            self.stopped.wait(timeout)
        return self.report
