"""The host-side process recorder: what the agent's processes ran, seen from outside its sandbox.

A thread of the runtime samples /proc every `interval_s` (0.2 s) while the agent runs. A process
is the agent's when it is the sandbox's root, a child of one of the agent's processes, in its
process group, in the run's cgroup, in the sandbox's pid namespace (bubblewrap, docker) or when
its environment carries the run's sandbox marker (runtime/sandbox/proctree.py). Each one is
recorded (a2c.contracts.process_record, logs/processes.jsonl) at first sight and at each exec
(a new auxiliary vector; a fork of the same program, or a rewritten title, is marked as such):
pid, ppid, start time, argv, cwd, exe, uid, and the code it runs (process_capture.py) kept in
logs/processes/ whatever its name, suffix or size up to the capture cap. Each sample also reads
every agent process's open files (/proc/PID/fd, fdinfo) and records which hold a file open for
writing under the output folder: the submitted folder is attributed to the processes seen
writing it (analysis/processes.py).

What it cannot see: a process that lives less than one interval (it may be missed; its children
are not), code a process reads by other means (a pipe, a socket, bytes it builds: the analysis
calls that a gap), a file swapped within one interval of the process's start by renaming a
folder on its path (a swapped file or symbolic link is caught by its ctime), and a command line
a process rewrites in place before the first sample. On an unconfined run (isolation none) a
process that clears its environment and leaves its session and process group escapes the
record; in bubblewrap and docker the pid namespace holds it.

Workspace files seen running are appended to `snapshots.git/a2c-ran` (runtime/snapshots.py keeps
them in every snapshot). When the recorder stops, the runner appends a `process_record` event
with the record's digest.
"""

from __future__ import annotations

import os
import posixpath
import re
import threading
import time
from pathlib import Path
from typing import Any

from a2c.contracts.process_record import (
    ProcessEnded,
    ProcessSeen,
    RecorderStarted,
    RecorderStopped,
    RecordWriter,
    WriteSeen,
    record_path,
)
from a2c.runtime.process_capture import CodeCapture, Proc
from a2c.runtime.process_code import (
    Stat,
    interpreter,
    proc_link,
    proc_read,
    read_stat,
    strip_deleted,
)
from a2c.runtime.sandbox.proctree import MARKER_VAR

INTERVAL_S = 0.2
MAPS_EVERY_S = 5.0            # a process's loaded libraries re-read this often
MAX_ARGV_BYTES = 64_000       # argv kept up to this (inline code is kept whole, as code)
TICK = os.sysconf("SC_CLK_TCK")


class ProcessRecorder(CodeCapture):
    """`ProcessRecorder(run_dir, root_pid=..., ...).start()`, then `.stop()` -> the event's data.

    `views`: the agent's folders as its processes name them (workspace, output, tmp, home);
    `places`: on an unconfined run, the host folders the agent can write (a confined one reads
    them from the sandbox's mount table); `cgroup`: the run's AgentCgroup when active;
    `sandbox_pid`: a process inside the sandbox's pid namespace (docker's container init)."""

    def __init__(self, run_dir: str | Path, *, root_pid: int | None, pgid: int | None = None,
                 marker: str | None = None, cgroup: Any = None, sandbox_pid: int | None = None,
                 views: dict[str, str] | None = None, places: list[str] | None = None,
                 secrets: dict[str, str] | None = None, interval_s: float = INTERVAL_S,
                 backend: str = "local", isolation: str = "", ran_file: Path | None = None,
                 note: str = ""):
        self.run_dir = Path(run_dir)
        self.root_pid, self.pgid, self.cgroup = root_pid, pgid, cgroup
        self.marker = f"{MARKER_VAR}={marker}".encode() if marker else None
        self.views = dict(views or {})
        self.output_views = [v.rstrip("/") + "/" for k, v in self.views.items()
                             if k.startswith("output")]
        self.workspace_views = [v.rstrip("/") for k, v in self.views.items()
                                if k.startswith("workspace")]
        self.places = [p.rstrip("/") for p in (places or [])]
        self.secrets = dict(secrets or {})
        self.interval_s = interval_s
        self.backend, self.isolation, self.note = backend, isolation, note
        self.ran_file = ran_file
        self.me = os.getpid()
        self.own_ns = proc_link("/proc/self/ns/pid")
        self.own_mnt = proc_link("/proc/self/ns/mnt")
        self.sandbox_ns: set[str] = set()
        if sandbox_pid:
            ns = proc_link(f"/proc/{sandbox_pid}/ns/pid")
            if ns and ns != self.own_ns:
                self.sandbox_ns.add(ns)
        self.boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        self.live: dict[int, Proc] = {}
        self.others: set[int] = set()
        self.ever: set[int] = set()
        self.ran: set[str] = set()
        self.samples = self.processes = self.captured = 0
        self.max_sample_s = 0.0
        self.cpu_s = 0.0
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self.session = sum(1 for line in _lines(record_path(self.run_dir))
                           if b'"kind": "recorder"' in line)
        self.writer = RecordWriter(self.run_dir)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ProcessRecorder:
        self._started = time.time()
        self.writer.write(RecorderStarted(at=self._started, session=self.session,
                                          interval_s=self.interval_s, backend=self.backend,
                                          isolation=self.isolation, views=self.views,
                                          note=self.note))
        self._sample_safely()   # the first sample now: the root is already there
        self._thread = threading.Thread(target=self._loop, name="a2c-process-record",
                                        daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        try:
            while not self._stop.wait(self.interval_s):
                self._sample_safely()
        finally:
            self.cpu_s += time.thread_time() - cpu0

    def stop(self) -> dict[str, Any]:
        """Stop sampling (after one last sample), close the record; the `process_record`
        event's data."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            if self._thread.is_alive():
                self.problems.append("the recorder's thread did not stop")
        cpu0 = time.thread_time()
        self._sample_safely()
        now = time.time()
        for proc in list(self.live.values()):
            self.writer.write(ProcessEnded(pid=proc.pid, start=proc.start,
                                           last_seen=proc.last_seen, gone=None))
        self.cpu_s += time.thread_time() - cpu0
        if self.isolation == "none":
            self.problems.append("isolation none: a process that clears its environment and "
                                 "leaves its session and process group is not recorded")
        self.writer.write(RecorderStopped(
            at=now, session=self.session, samples=self.samples, processes=self.processes,
            captured=self.captured, cpu_s=round(self.cpu_s, 4),
            wall_s=round(now - self._started, 3), max_sample_s=round(self.max_sample_s, 4),
            problems=self.problems[:20]))
        digest = self.writer.close()
        return {"file": f"logs/{record_path(self.run_dir).name}", **digest,
                "session": self.session, "processes": self.processes,
                "captured": self.captured, "samples": self.samples,
                "interval_s": self.interval_s, "cpu_s": round(self.cpu_s, 4),
                "problems": self.problems[:20]}

    # ------------------------------------------------------------------ sampling
    def _sample_safely(self) -> None:
        began = time.monotonic()
        try:
            self.sample()
        except Exception as exc:  # noqa: BLE001 - one bad sample never stops the record
            if len(self.problems) < 20:
                self.problems.append(f"a sample failed: {type(exc).__name__}: {exc}")
        self.samples += 1
        self.max_sample_s = max(self.max_sample_s, time.monotonic() - began)

    def sample(self) -> None:
        now = time.time()
        listing = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        for pid in list(self.live):
            proc = self.live[pid]
            st = read_stat(pid) if pid in listing else None
            if st is None or st.ticks != proc.ticks or st.state in ("Z", "X"):
                self.writer.write(ProcessEnded(pid=pid, start=proc.start,
                                               last_seen=proc.last_seen, gone=now))
                del self.live[pid]
                if st is not None and st.ticks != proc.ticks:
                    listing.add(pid)   # a new process on a reused pid
                    self.others.discard(pid)
        self.others &= listing
        fresh: dict[int, Stat] = {}
        for pid in listing:
            if pid in self.live or pid in self.others or pid == self.me:
                continue
            st = read_stat(pid)
            if st is not None:
                fresh[pid] = st
        cgroup = self._cgroup_procs() if fresh else set()
        added = set()
        for pid in sorted(fresh, key=lambda p: fresh[p].ticks):
            st = fresh[pid]
            if st.state not in ("Z", "X") and self._is_agent(pid, st, cgroup):
                self._new(pid, st, now)
                added.add(pid)
            else:
                self.others.add(pid)
        for pid, proc in list(self.live.items()):
            if pid not in added:
                cmdline = proc_read(f"/proc/{pid}/cmdline", MAX_ARGV_BYTES + 1)
                if cmdline is not None and cmdline and cmdline != proc.cmdline:
                    self._changed(proc, cmdline, now)
            if proc.exe_pending and pid not in added:
                self._program(proc, proc.exe_pending)
                proc.exe_pending = None
            proc.last_seen = now
            self._open_files(proc, now)
            if proc.python and now - proc.maps_at >= MAPS_EVERY_S:
                proc.maps_at = now
                self._libraries(proc)

    def _cgroup_procs(self) -> set[int]:
        if self.cgroup is None or not getattr(self.cgroup, "active", False):
            return set()
        try:
            return set(self.cgroup.procs())
        except OSError:
            return set()

    def _is_agent(self, pid: int, st: Stat, cgroup: set[int]) -> bool:
        if pid == self.root_pid or st.ppid in self.live or pid in cgroup or \
                (self.pgid and self.pgid > 1 and st.pgid == self.pgid):
            return True
        ns = proc_link(f"/proc/{pid}/ns/pid")
        if ns is not None and ns in self.sandbox_ns:
            return True
        if self.marker is not None:
            env = proc_read(f"/proc/{pid}/environ", 1 << 20)
            if env is not None and self.marker in env.split(b"\0"):
                return True
        return False

    # ------------------------------------------------------------------ one process
    def _new(self, pid: int, st: Stat, now: float) -> None:
        cmdline = proc_read(f"/proc/{pid}/cmdline", MAX_ARGV_BYTES + 1) or b""
        proc = Proc(pid=pid, ticks=st.ticks, start=round(self.boot + st.ticks / TICK, 3),
                     ppid=st.ppid, image=0, cmdline=cmdline, seen=now, last_seen=now,
                     auxv=proc_read(f"/proc/{pid}/auxv", 4096),
                     exe=proc_link(f"/proc/{pid}/exe"))
        ns = proc_link(f"/proc/{pid}/ns/pid")
        if ns and ns != self.own_ns:
            self.sandbox_ns.add(ns)
        parent = self.live.get(st.ppid)
        if parent is not None:   # an exec of the parent not yet seen: read it first
            now_cmdline = proc_read(f"/proc/{parent.pid}/cmdline", MAX_ARGV_BYTES + 1)
            if now_cmdline and now_cmdline != parent.cmdline:
                self._changed(parent, now_cmdline, now)
        forked = parent is not None and proc.auxv is not None and proc.auxv == parent.auxv \
            and proc.exe == parent.exe and cmdline == parent.cmdline
        proc.maps_at = now - MAPS_EVERY_S + 1.0    # its libraries first read a second on
        self.live[pid] = proc
        if forked:
            proc.python = parent.python
        self._describe(proc, now, parent_seen=st.ppid in self.ever, forked=forked)
        self.ever.add(pid)

    def _changed(self, proc: Proc, cmdline: bytes, now: float) -> None:
        """A new command line: an exec (a new auxiliary vector), or the same program rewriting
        its title (setproctitle: the code its new arguments name is still read, no more)."""
        auxv = proc_read(f"/proc/{proc.pid}/auxv", 4096)
        rewritten = auxv is not None and auxv == proc.auxv
        proc.image += 1
        proc.cmdline, proc.auxv = cmdline, auxv
        proc.exe = proc_link(f"/proc/{proc.pid}/exe")
        self._describe(proc, now, rewritten=rewritten)

    def _describe(self, proc: Proc, now: float, parent_seen: bool = True, forked: bool = False,
                  rewritten: bool = False) -> None:
        pid = proc.pid
        raw = proc.cmdline
        truncated = len(raw) > MAX_ARGV_BYTES
        argv = [a.decode("utf-8", "surrogateescape") for a in raw[:MAX_ARGV_BYTES]
                .rstrip(b"\0").split(b"\0")] if raw else []
        cwd = proc_link(f"/proc/{pid}/cwd")
        exe = proc.exe
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            uid = None
        shown = [self._redact_text(a) for a in argv]
        self.processes += 1
        self.writer.write(ProcessSeen(pid=pid, start=proc.start, image=proc.image,
                                      ppid=proc.ppid, seen=now, argv=shown, cwd=cwd,
                                      exe=strip_deleted(exe), uid=uid,
                                      parent_seen=parent_seen,
                                      argv_truncated=True if truncated else None,
                                      forked=True if forked else None,
                                      rewritten=True if rewritten else None))
        if forked:
            return       # its parent's program, recorded with the parent
        kind = interpreter(exe, argv)
        proc.python = proc.python or kind == "python"
        try:
            self._code(proc, argv, cwd, exe, kind, title_only=rewritten)
        except Exception as exc:  # noqa: BLE001 - recorded as code not read, a gap
            self._code_line(proc, how="script", language=kind or "other", captured=False,
                            why=f"could not be read: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ files open
    def _open_files(self, proc: Proc, now: float) -> None:
        if not self.output_views:
            return
        for name, target in self._fds(proc.pid):
            path = strip_deleted(target)
            if not any(path.startswith(v) for v in self.output_views):
                continue
            folder = posixpath.dirname(path)
            if folder in proc.writes:
                continue
            info = proc_read(f"/proc/{proc.pid}/fdinfo/{name}", 4096) or b""
            match = re.search(rb"^flags:\s*([0-7]+)", info, re.MULTILINE)
            if match and int(match.group(1), 8) & 0o3 in (1, 2):
                proc.writes.add(folder)
                self.writer.write(WriteSeen(pid=proc.pid, start=proc.start, path=path, at=now))

def _lines(path: Path) -> list[bytes]:
    try:
        with open(path, "rb") as handle:
            return handle.readlines()
    except OSError:
        return []


# ---------------------------------------------------------------------------- the runner's side
class _NotRecording:
    """What `record_agent` returns when the recorder could not start: its event says why."""

    def __init__(self, why: str):
        self.why = why

    def stop(self) -> dict[str, Any]:
        return {"file": "logs/processes.jsonl", "sha256": "", "size": 0,
                "problems": [f"the process recorder did not start: {self.why}"]}


def record_agent(paths, proc, backend, secrets: dict[str, str] | None = None,
                 interval_s: float | None = None):
    """Start recording the agent just launched (`proc`: the backend's process handle) for the
    run at `paths` (a RunPaths). `.stop()` gives the `process_record` event's data; a recorder
    that could not start says so there (the analysis then has a gap, never a verdict)."""
    try:
        return _record_agent(paths, proc, backend, secrets, interval_s)
    except Exception as exc:  # noqa: BLE001 - the run goes on; its record says why
        return _NotRecording(f"{type(exc).__name__}: {exc}")


def _record_agent(paths, proc, backend, secrets, interval_s) -> ProcessRecorder:
    isolation = getattr(backend, "isolation", "")
    confined = isolation in ("bubblewrap", "docker")
    sandbox_pid = None
    note = "local backend: /proc of this machine"
    if getattr(backend, "name", "") == "docker":
        try:
            proc.container.reload()
            sandbox_pid = int(proc.container.attrs["State"]["Pid"]) or None
        except Exception:  # noqa: BLE001 - no container pid: recorded as a problem below
            sandbox_pid = None
        note = ("docker backend: the container's processes through this machine's /proc (its "
                "pid namespace); an engine on another machine or in a VM is not seen")
    if confined:
        views = {"workspace": "/workspace", "output": "/workspace/output", "tmp": "/tmp",
                 "home": "/run/a2c/home"}
        places: list[str] = []
    else:
        views = {"workspace": str(paths.workspace), "output": str(paths.output),
                 "tmp": str(paths.agent_tmp), "home": str(paths.agent_home)}
        places = [str(paths.workspace), str(paths.agent_tmp), str(paths.agent_home), "/tmp",
                  "/dev/shm", "/var/tmp"]
    views["workspace_host"] = str(paths.workspace)
    views["output_host"] = str(paths.output)
    from a2c.runtime.snapshots import RAN_FILE as ran_name
    recorder = ProcessRecorder(
        paths.root, root_pid=getattr(proc, "pid", None), pgid=getattr(proc, "pgid", None),
        marker=getattr(proc, "marker", None), cgroup=getattr(proc, "cgroup", None),
        sandbox_pid=sandbox_pid, views=views, places=places, secrets=secrets,
        interval_s=interval_s or INTERVAL_S, backend=getattr(backend, "name", "local"),
        isolation=isolation, ran_file=paths.snapshots / ran_name, note=note)
    if getattr(backend, "name", "") == "docker" and sandbox_pid is None:
        recorder.problems.append("docker: the container's pid is not known on this machine: "
                                 "its processes are not recorded")
    return recorder.start()
