"""Helper processes on the host: the one way the runtime starts, waits for, stops and cleans up
the services it runs beside the agent (the grader service, the driver gateway, the scripted
driver, a task's environment services).

    hp = HostProcess.spawn([python, "-m", MODULE, RUN], what="grader service", log=LOG)
    info = hp.wait_ready(pid_file_ready(READY, hp.pid), timeout=60)   # or any probe
    ...
    hp.stop(grace=30)                       # SIGTERM, `grace` s, then SIGKILL
    stop_stale(PID_FILE, [MODULE, str(RUN)])  # after a crash: the one left over, if it is ours

Every helper runs in a session (and process group) of its own: an agent that kills its own
process group cannot take it down, a signal meant for the runtime's terminal does not reach it,
and it is stopped as a group, so a shell and what it started go together. A probe is any
callable that returns something true once the helper serves (a ready file naming its pid, a port
file, an HTTP answer); waiting stops at once with the tail of the helper's log when it exits
first, and kills it when it is not ready in time. A pid file left by a runtime that crashed is
trusted only when the process's command line still names the helper and the run, so a recycled
pid is left alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from a2c.errors import RunError
from a2c.fsutil import read_tail

POLL_S = 0.02


class HelperExited(RunError):
    """The helper exited before it was ready."""

    def __init__(self, message: str, returncode: int | None, tail: str):
        super().__init__(message)
        self.returncode, self.tail = returncode, tail


class HelperNotReady(RunError):
    """The helper was not ready in time (it has been killed)."""


def unlink_quiet(path: str | os.PathLike) -> None:
    try:
        Path(path).unlink()
    except FileNotFoundError:
        pass


class HostProcess:
    """One helper process in its own session (see the module doc)."""

    def __init__(self, proc: subprocess.Popen, what: str, log: Path | None = None):
        self.proc, self.what, self.log = proc, what, log

    @classmethod
    def spawn(cls, argv: list[str], *, what: str, log: str | os.PathLike | None = None,
              env: dict[str, str] | None = None, cwd: str | os.PathLike | None = None,
              ) -> HostProcess:
        """Start `argv` in a new session, stdin closed, stdout and stderr appended to `log`
        (discarded without one). OSError when it cannot be run."""
        log_path = Path(log) if log is not None else None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(argv, cwd=str(cwd) if cwd else None, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            if log_path is not None:
                out.close()
        return cls(proc, what, log_path)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 1500) -> str:
        return read_tail(self.log, limit) if self.log is not None else ""

    def write_pid(self, path: str | os.PathLike) -> None:
        """The pid file `stop_stale` reads after a crash of the runtime."""
        Path(path).write_text(str(self.pid))

    def wait_ready(self, probe: Callable[[], Any], timeout: float | None = None, *,
                   deadline: float | None = None, poll: float = POLL_S,
                   stop_grace: float | None = None) -> Any:
        """Call `probe` until it returns something true, and return that. HelperExited when
        the helper exits first; HelperNotReady at `deadline` (a monotonic time) or after
        `timeout` s, the helper killed (or stopped with `stop_grace`)."""
        if deadline is None:
            deadline = time.monotonic() + (timeout if timeout is not None else 60.0)
        while True:
            found = probe()
            if found:
                return found
            if self.proc.poll() is not None:
                tail = self.log_tail()
                raise HelperExited(f"the {self.what} exited with status "
                                   f"{self.proc.returncode}:\n{tail}", self.proc.returncode, tail)
            if time.monotonic() >= deadline:
                if stop_grace is None:
                    self.kill()
                else:
                    self.stop(stop_grace)
                where = f" (see {self.log})" if self.log is not None else ""
                within = f"{timeout:g} s" if timeout is not None else "the time allowed"
                raise HelperNotReady(f"the {self.what} was not ready within {within}{where}")
            time.sleep(poll)

    def _signal(self, sig: int, group: bool) -> None:
        try:
            if group:
                os.killpg(self.proc.pid, sig)   # its own session: the group id is its pid
            else:
                self.proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def stop(self, grace: float | None = 10.0, *, group: bool = True) -> int | None:
        """SIGTERM (to its process group, or to the helper alone with `group=False`), wait
        `grace` s (None: as long as it takes), then SIGKILL. The exit status, None if it
        outlived even that."""
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM, group)
            try:
                return self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill(group=group)
        return self.proc.poll()

    def kill(self, *, group: bool = True, wait: float = 10.0) -> None:
        """SIGKILL (its group, or the helper alone) and reap it."""
        if self.proc.poll() is None:
            self._signal(signal.SIGKILL, group)
        try:
            self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass


def file_ready(path: str | os.PathLike,
               check: Callable[[str], Any] = lambda text: text.strip()) -> Callable[[], Any]:
    """A probe: `check(text)` of the file at `path` once it exists (its value when true)."""
    path = Path(path)

    def probe() -> Any:
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError):
            return None
        return check(text)
    return probe


def pid_file_ready(path: str | os.PathLike, pid: int) -> Callable[[], dict | None]:
    """A probe: the JSON ready file a helper writes once it serves, when it names `pid` (a file
    left by an earlier process does not count); the parsed object."""
    def check(text: str) -> dict | None:
        try:
            info = json.loads(text)
        except ValueError:
            return None
        return info if isinstance(info, dict) and info.get("pid") == pid else None
    return file_ready(path, check)


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def is_helper(pid: int, markers: Iterable[str]) -> bool:
    """Whether process `pid`'s command line holds every marker: an argument that is the marker
    or a path under it (RUN matches RUN/driver/scripted.port, never RUN0)."""
    cmd = _cmdline(pid)
    return bool(cmd) and all(any(part == m or part.startswith(m + b"/") for part in cmd)
                             for m in (m.encode() for m in markers))


def stop_stale(pid_file: str | os.PathLike, markers: Iterable[str], grace: float = 5.0) -> bool:
    """After a crash of the runtime: stop the helper named by `pid_file` with its process
    group and descendants (SIGTERM, `grace` s, SIGKILL), if its command line still holds every
    marker (its module, the run's folder); True when one was found."""
    from a2c.runtime.sandbox.proctree import kill_tree
    try:
        pid = int(Path(pid_file).read_text())
    except (OSError, ValueError):
        return False
    if pid <= 1 or not is_helper(pid, list(markers)):
        return False
    kill_tree(pid, pid, None, grace=grace)
    return True
