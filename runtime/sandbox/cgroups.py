"""The local backend's resource limits: one cgroup per run around the agent's whole process tree.

The docker backend has the engine enforce `budget.memory`, `cpus` and `pids`; the local backend
enforces them itself, with a cgroup made for the run (named by its marker) before the agent
starts. The agent's first process enters it before exec (`AgentCgroup.enter`, a `preexec_fn`), so
everything it forks is inside from the start and cannot leave (the agent is never root). Without
limits an agent could take every page and process of the node, and with them the grader, the
gateway and every other trial on it.

Both cgroup versions, written directly (no systemd: PID 1 need not be systemd):

- v2 (the unified hierarchy at /sys/fs/cgroup): `a2c/<marker>` under the hierarchy's root, the
  controllers enabled through `cgroup.subtree_control`; memory.max + memory.swap.max = 0 (the
  limit holds swap included), cpu.max, pids.max; an OOM kill is counted in memory.events.
- v1 (a folder per controller): `<own cgroup>/a2c-<marker>` in memory, cpu, cpuacct, pids and
  freezer; memory.limit_in_bytes + memory.memsw.limit_in_bytes where swap is accounted,
  cpu.cfs_quota_us / cpu.cfs_period_us, pids.max; an OOM kill is counted in memory.oom_control
  (`oom_kill`), or seen as memory.failcnt on older kernels.
A refused fork is counted in pids.events (`max`); the agent's end is named by what the kernel
counted (causes.py): a fork failure is "process limit reached", never "out of memory".

A limit the host cannot enforce (not root, the controller missing, a read-only cgroupfs) is never
dropped silently: `record()` says for each limit whether it is enforced and why not (run.json's
`limits`), and `warning()` says it in one line at the start of the run.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from pathlib import Path

from a2c.runtime.sandbox.cgroup_limits import Limits

CGROUP_ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000
V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "freezer")   # cpuacct: usage; freezer: kill
NEEDS = {"memory": "memory", "cpus": "cpu", "pids": "pids"}         # limit -> controller
UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


class CgroupError(OSError):
    """A cgroup could not be made or set; its message says why in words."""


def parse_size(text: str | int) -> int:
    """Bytes of a size such as `512m`, `1g`, `1024k` or a plain byte count."""
    match = re.fullmatch(r"\s*([0-9]+)\s*([bkmgt]?)b?\s*", str(text).lower())
    if not match:
        raise ValueError(f"not a size: {text!r} (e.g. 512m or 1g)")
    return int(match.group(1)) * UNITS[match.group(2)]


def own_paths(text: str | None = None) -> dict[str, str]:
    """This process's cgroup per v1 controller, and "" for v2 (from /proc/self/cgroup)."""
    if text is None:
        try:
            text = Path("/proc/self/cgroup").read_text()
        except OSError:
            return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def detect(root: Path = CGROUP_ROOT) -> tuple[str | None, str]:
    """("v2" | "v1" | None, in words): which hierarchy `root` holds."""
    if (root / "cgroup.controllers").is_file():
        controllers = (root / "cgroup.controllers").read_text().split()
        return "v2", "cgroup v2 (controllers: " + (", ".join(controllers) or "none") + ")"
    mounted = [name for name in V1_CONTROLLERS if (root / name / "cgroup.procs").is_file()]
    if mounted:
        return "v1", "cgroup v1 (controllers: " + ", ".join(mounted) + ")"
    return None, f"no cgroup filesystem at {root}"


def _write(path: Path, value: str | int) -> None:
    with open(path, "w") as handle:
        handle.write(f"{value}\n")


def _why(exc: OSError, where: Path) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (f"permission denied at {where}: the runtime is not root (or the cgroup is not "
                "delegated to it)")
    if exc.errno == errno.EROFS:
        return f"the cgroup filesystem is read-only ({where})"
    if exc.errno == errno.EBUSY:
        return (f"{where}: the controller cannot be enabled there (a cgroup v2 parent with "
                "processes of its own)")
    return f"{where}: {exc.strerror or exc}"


class AgentCgroup:
    """The run's cgroup (one folder in v2, one per controller in v1) and what it enforces."""

    def __init__(self, marker: str, version: str | None, dirs: dict[str, Path],
                 limits: Limits):
        self.marker = marker
        self.version = version
        self.dirs = dirs                   # controller ("" in v2) -> the run's folder
        self.limits = limits
        # what `enter` writes, prepared here: a preexec_fn runs in the forked child, where the
        # less Python does the better (no imports, no allocation-heavy work, no locks)
        self._procs = [os.fsencode(d / "cgroup.procs") for d in dict.fromkeys(dirs.values())]
        self._base = (0, 0)                # (oom kills, pids refusals) when the agent started

    # ------------------------------------------------------------------ make
    @classmethod
    def create(cls, marker: str, mem_limit: str | None = None, cpus: float | None = None,
               pids: int | None = None, root: Path = CGROUP_ROOT,
               self_cgroup: str | None = None) -> AgentCgroup:
        """The run's cgroup with the limits asked; those the host cannot enforce are recorded
        as such (`record`), never raised: the run goes on and says so."""
        limits = Limits.asked(mem_limit, cpus, pids)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", marker or f"pid{os.getpid()}")
        version, words = detect(root)
        if not limits.items():
            return cls(marker, version, {}, limits)
        if version is None:
            return cls._unenforced(marker, version, limits, words)
        try:
            dirs = (cls._make_v2(root, name, limits) if version == "v2"
                    else cls._make_v1(root, name, limits, own_paths(self_cgroup)))
        except CgroupError as exc:
            return cls._unenforced(marker, version, limits, str(exc))
        group = cls(marker, version, dirs, limits)
        try:
            group._apply(mem_limit, cpus, pids)
        except OSError as exc:
            group.remove()
            return cls._unenforced(marker, version, limits, _why(exc, Path(exc.filename or root)))
        group._base = (group.oom_kills(), group.pid_refusals())   # a folder left by a crash
        return group

    @classmethod
    def _unenforced(cls, marker, version, limits: Limits, why: str) -> AgentCgroup:
        for _, limit in limits.items():
            if not limit.why:
                limit.enforced, limit.why = False, why
        return cls(marker, version, {}, limits)

    @staticmethod
    def _make_v1(root: Path, name: str, limits: Limits,
                 own: dict[str, str]) -> dict[str, Path]:
        dirs: dict[str, Path] = {}
        for controller in V1_CONTROLLERS:
            mount = root / controller
            if not (mount / "cgroup.procs").is_file():
                continue
            parent = mount / own.get(controller, "").lstrip("/")
            parent = parent if parent.is_dir() else mount   # another namespace's path
            folder = parent / f"a2c-{name}"
            try:
                folder.mkdir(exist_ok=True)
            except OSError as exc:
                for made in dirs.values():
                    _rmdir(made)
                raise CgroupError(_why(exc, folder)) from None
            dirs[controller] = folder
        for key, limit in limits.items():
            if NEEDS[key] not in dirs:
                limit.why = f"no {NEEDS[key]} controller mounted under {root}"
        if not any(NEEDS[key] in dirs for key, _ in limits.items()):
            for made in dirs.values():
                _rmdir(made)
            raise CgroupError(f"none of the controllers asked for is mounted under {root}")
        return dirs

    @staticmethod
    def _make_v2(root: Path, name: str, limits: Limits) -> dict[str, Path]:
        available = set((root / "cgroup.controllers").read_text().split())
        wanted = sorted({NEEDS[key] for key, _ in limits.items()} & available)
        for key, limit in limits.items():
            if NEEDS[key] not in available:
                limit.why = f"the {NEEDS[key]} controller is not available in {root}"
        base, folder = root / "a2c", root / "a2c" / name
        try:
            base.mkdir(exist_ok=True)
            for where in (root, base):   # the root may hold processes; `a2c` itself never does
                if wanted:
                    _write(where / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
            folder.mkdir(exist_ok=True)
        except OSError as exc:
            raise CgroupError(_why(exc, Path(exc.filename or base))) from None
        return {"": folder}

    def _apply(self, mem_limit: str | None, cpus: float | None, pids: int | None) -> None:
        v2 = self.version == "v2"
        folder = self.dirs.get("")
        memory, cpu, pid = self.limits.memory, self.limits.cpus, self.limits.pids
        if memory and memory.why is None:
            size = parse_size(mem_limit)
            if v2:
                _write(folder / "memory.max", size)
                if (folder.parent / "memory.swap.max").exists() or \
                        (folder / "memory.swap.max").exists():
                    _write(folder / "memory.swap.max", 0)
            else:
                mem_dir = self.dirs["memory"]
                _write(mem_dir / "memory.limit_in_bytes", size)   # before memsw (memsw >= it)
                if (mem_dir.parent / "memory.memsw.limit_in_bytes").exists():
                    _write(mem_dir / "memory.memsw.limit_in_bytes", size)
            memory.enforced = True
        if cpu and cpu.why is None:
            quota = max(1000, int(round(float(cpus) * CFS_PERIOD_US)))
            if v2:
                _write(folder / "cpu.max", f"{quota} {CFS_PERIOD_US}")
            else:
                cpu_dir = self.dirs["cpu"]
                _write(cpu_dir / "cpu.cfs_period_us", CFS_PERIOD_US)
                _write(cpu_dir / "cpu.cfs_quota_us", quota)
            cpu.enforced = True
        if pid and pid.why is None:
            _write((folder if v2 else self.dirs["pids"]) / "pids.max", int(pids))
            pid.enforced = True

    # ------------------------------------------------------------------ what it says
    def record(self) -> dict:
        """run.json's `limits`: {memory|cpus|pids: {asked, enforced, why}}, plus the version."""
        out = {key: limit.record() for key, limit in self.limits.items()}
        if out:
            out["cgroup"] = self.version or "none"
        return out

    def warning(self) -> str | None:
        """One line naming every limit asked and not enforced, and why; None when all hold."""
        missing = {k: v for k, v in self.limits.items() if not v.enforced}
        if not missing:
            return None
        whys = dict.fromkeys(limit.why or "unknown" for limit in missing.values())
        names = ", ".join(f"{k} {v.asked}" for k, v in missing.items())
        return (f"WARNING: resource limits NOT enforced ({names}): {'; '.join(whys)}. "
                "The agent can take this machine's memory and processes; `a2c doctor` says how "
                "to fix it.")

    # ------------------------------------------------------------------ the agent in it
    def enter(self) -> None:
        """Put the calling process in the cgroup (a Popen `preexec_fn`: the child, before exec).
        Writing "0" means the writer itself, in both versions."""
        for path in self._procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    @property
    def active(self) -> bool:
        return bool(self.dirs)

    def _read(self, controller: str, name: str) -> str | None:
        folder = self.dirs.get("" if self.version == "v2" else controller)
        try:
            return (folder / name).read_text() if folder else None
        except OSError:
            return None

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit (0 when unknown)."""
        return self._oom()[0]

    def _oom(self) -> tuple[int, bool]:
        """(OOM kills, whether that is the kernel's counter or only a failed charge)."""
        text = self._read("memory", "memory.events" if self.version == "v2"
                          else "memory.oom_control") or ""
        match = re.search(r"^oom_kill (\d+)", text, re.MULTILINE)
        if match:
            return int(match.group(1)), True
        if self.version == "v1":   # kernels before 4.13 have no counter: a failed charge
            fails = self._read("memory", "memory.memsw.failcnt") or \
                self._read("memory", "memory.failcnt") or "0"
            return (1 if int(fails.strip() or 0) > 0 else 0), False
        return 0, True

    def pid_refusals(self) -> int:
        """How many forks (or threads) the pids limit refused: pids.events `max` (0 unknown)."""
        match = re.search(r"^max (\d+)", self._read("pids", "pids.events") or "", re.MULTILINE)
        return int(match.group(1)) if match else 0

    def exit_cause(self, returncode: int | None = None) -> str | None:
        """Why the agent ended (causes.py), from what the kernel counted since it started;
        None when its exit code says it all."""
        from a2c.runtime.sandbox import causes
        memory, pids = self.limits.memory, self.limits.pids
        kills, exact = self._oom() if memory and memory.enforced else (0, True)
        refusals = self.pid_refusals() if pids and pids.enforced else 0
        return causes.name(returncode, oom_kills=max(0, kills - self._base[0]),
                           pid_refusals=max(0, refusals - self._base[1]),
                           mem_limit=memory.asked if memory else None,
                           pids_limit=pids.asked if pids else None, oom_exact=exact)

    def cpu_usage_s(self) -> float | None:
        """CPU seconds the cgroup's processes used so far."""
        if self.version == "v2":
            match = re.search(r"^usage_usec (\d+)", self._read("cpu", "cpu.stat") or "",
                              re.MULTILINE)
            return int(match.group(1)) / 1e6 if match else None
        text = self._read("cpuacct", "cpuacct.usage")
        return int(text) / 1e9 if text and text.strip().isdigit() else None

    def procs(self) -> set[int]:
        pids: set[int] = set()
        for folder in dict.fromkeys(self.dirs.values()):
            try:
                pids |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return pids

    # ------------------------------------------------------------------ end
    def kill(self, rounds: int = 50) -> int:
        """SIGKILL every process left in the cgroup (frozen first, so a fork bomb cannot race
        the kill); returns how many were signalled."""
        if not self.dirs:
            return 0
        folder = self.dirs.get("")
        if folder is not None and (folder / "cgroup.kill").exists():
            pids = self.procs()
            _write(folder / "cgroup.kill", 1)
            return len(pids)
        frozen = self._freeze(True)   # frozen: none can fork; the killed die once thawed
        signalled: set[int] = set()
        try:
            for _ in range(rounds):
                pids = self.procs()
                if not pids:
                    break
                for pid in pids - signalled:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                signalled |= pids
                if frozen:
                    frozen = not self._freeze(False)
                time.sleep(0.02)
        finally:
            if frozen:
                self._freeze(False)
        return len(signalled)

    def _freeze(self, frozen: bool) -> bool:
        folder = self.dirs.get("freezer")
        try:
            if folder is not None:
                _write(folder / "freezer.state", "FROZEN" if frozen else "THAWED")
                return True
            if self.version == "v2" and (self.dirs[""] / "cgroup.freeze").exists():
                _write(self.dirs[""] / "cgroup.freeze", int(frozen))
                return True
        except OSError:
            pass
        return False

    def remove(self) -> list[str]:
        """Remove the run's folders (empty by now); returns those that would not go."""
        left = [str(folder) for folder in dict.fromkeys(self.dirs.values()) if not _rmdir(folder)]
        self.dirs = {}
        self._procs = []
        return left

    def close(self) -> list[str]:
        """Kill what is left inside, then remove the cgroup (idempotent)."""
        if not self.dirs:
            return []
        self.kill()
        return self.remove()


def _rmdir(folder: Path, tries: int = 40) -> bool:
    """rmdir a cgroup folder, waiting a little for exiting tasks to leave it."""
    for _ in range(tries):
        try:
            folder.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                return False
            time.sleep(0.05)
    return False
