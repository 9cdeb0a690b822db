"""Finding and stopping every process an agent started, however it tried to detach.

A process tree is found three ways, and the union is stopped: the descendants of the root pid
(via /proc ppid links), the members of the root's process group, and every process whose
environment carries the run's sandbox marker (`A2C_SANDBOX_ID=<marker>`), which catches
`setsid`'ed processes whose parent already exited (they are re-parented to init and leave the
tree). Inside bubblewrap's pid namespace all of them also die with the namespace's init.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MARKER_VAR = "A2C_SANDBOX_ID"


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of a live process, None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may hold spaces and parentheses: split after the last ')'
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2])


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _has_marker(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return needle in handle.read().split(b"\0")
    except OSError:
        return False


def collect(root: int | None, pgid: int | None = None, marker: str | None = None) -> set[int]:
    """Every live pid belonging to the sandboxed tree (never this process)."""
    me = os.getpid()
    table: dict[int, tuple[str, int, int]] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None:
            table[pid] = st
    found: set[int] = set()
    if root is not None and root in table:
        found.add(root)
        children: dict[int, list[int]] = {}
        for pid, (_, ppid, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        stack = [root]
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in found:
                    found.add(child)
                    stack.append(child)
    if pgid is not None and pgid > 1:
        found.update(pid for pid, (_, _, g) in table.items() if g == pgid)
    if marker:
        needle = f"{MARKER_VAR}={marker}".encode()
        found.update(pid for pid in table if pid != me and _has_marker(pid, needle))
    found.discard(me)
    return {pid for pid in found if table.get(pid, ("X",))[0] not in ("Z", "X")}


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(root: int | None, pgid: int | None = None, marker: str | None = None,
              grace: float = 3.0, reap=None) -> dict:
    """SIGTERM the whole tree, wait up to `grace` seconds, SIGKILL what is left.

    `reap` (optional callable) is called while waiting so the caller can reap its direct child.
    Returns {"terminated": n, "killed": n, "survivors": [pids], "elapsed_s": t}.
    """
    start = time.monotonic()
    pids = collect(root, pgid, marker)
    first = set(pids)
    _signal_all(pids, signal.SIGTERM)
    deadline = start + grace
    while time.monotonic() < deadline:
        if reap:
            reap()
        pids = collect(root, pgid, marker) | {p for p in pids if alive(p)}
        if not pids:
            break
        _signal_all(pids - first, signal.SIGTERM)  # forked during the grace period
        first |= pids
        time.sleep(0.05)
    killed = 0
    for _ in range(20):
        pids = collect(root, pgid, marker) | {p for p in first if alive(p)}
        if not pids:
            break
        killed += len(pids)
        _signal_all(pids, signal.SIGKILL)
        if reap:
            reap()
        time.sleep(0.05)
    if reap:
        reap()
    survivors = sorted(collect(root, pgid, marker) | {p for p in first if alive(p)})
    return {"terminated": len(first), "killed": killed, "survivors": survivors,
            "elapsed_s": round(time.monotonic() - start, 3)}
