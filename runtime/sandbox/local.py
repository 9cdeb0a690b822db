"""The `local` backend: a process group in the run's workspace, inside bubblewrap where present.

With bubblewrap the agent sees a minimal filesystem: the system read-only (/usr, /lib, /lib64,
/bin, /sbin, /etc), the Python interpreter and the virtual environment read-only, the a2c
sources read-only (the checkout's folders for an editable install), `/data` and `/model`
read-only, `/workspace` read-write, the grader's socket at `/run/a2c/grader.sock`, its own /tmp,
/proc and /dev. Every namespace is unshared (no network but its own loopback), it dies with the
runtime, and it runs in a new session. The held-out data, the grader's directory (token,
config) and the run record are not mounted, so they do not exist inside. Without bubblewrap
the agent runs unconfined, with a loud warning and `isolation: none`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from a2c.errors import RunError
from a2c.runtime.sandbox import SandboxSpec
from a2c.runtime.sandbox.proctree import MARKER_VAR, kill_tree

INSIDE_WORKSPACE = "/workspace"
INSIDE_DATA = "/data"
INSIDE_MODEL = "/model"
INSIDE_RUN = "/run/a2c"
INSIDE_SOCKET = "/run/a2c/grader.sock"
INSIDE_ENV_SOCKETS = "/run/a2c/env"     # environment gateways (runtime/sidecars/gateway.py)
INSIDE_COMMAND_LOG = "/run/a2c/commands.log"
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc")


def bwrap_path() -> str | None:
    if os.environ.get("A2C_NO_BWRAP"):
        return None
    return shutil.which("bwrap")


def bwrap_works(path: str | None = None) -> bool:
    path = path or bwrap_path()
    if not path:
        return False
    try:
        proc = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-all", "true"],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


EDITABLE_FINDERS = ("_a2c_editable",)    # the import hook of an editable install (hatch_build.py)


def a2c_source_dirs() -> set[Path]:
    """The folders the a2c packages are loaded from.

    From a wheel that is site-packages/a2c (inside the venv). From an editable install the import
    hook maps each top-level package (`a2c`, `a2c.compiler`, `a2c.runtime`, ...) to its folder in
    the checkout; its MAPPING names them all, so a new top-level folder needs no change here. An
    older setuptools editable install (`__editable___a2c_*_finder`) has the same MAPPING.
    """
    import a2c
    dirs = {Path(entry).resolve() for entry in getattr(a2c, "__path__", [])}
    # only a hook that is loaded counts (a .pth imports it at start-up): another environment's
    # hook that merely lies on sys.path does not say where this interpreter's a2c comes from
    for name, module in list(sys.modules.items()):
        if name in EDITABLE_FINDERS or (name.startswith("__editable___a2c_")
                                        and name.endswith("_finder")):
            mapping = getattr(module, "MAPPING", None)
            if isinstance(mapping, dict):
                dirs.update(Path(folder).resolve() for folder in mapping.values())
    return dirs


def python_binds() -> list[str]:
    """Host folders the agent's Python needs: interpreter prefix, venv, the a2c sources."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             Path(sys.executable).resolve().parent}
    paths |= a2c_source_dirs()
    # site-packages folders on sys.path besides the venv's own: a .pth that chains another
    # environment's packages (CI's wheel venv reuses the main venv's torch this way)
    paths |= {Path(entry).resolve() for entry in sys.path
              if Path(entry).name in ("site-packages", "dist-packages") and Path(entry).is_dir()}
    system = tuple(Path(d) for d in SYSTEM_DIRS)
    out = []
    for path in sorted(paths):
        if any(path == s or s in path.parents for s in system):
            continue  # already visible through the system binds
        if any(p in path.parents for p in paths if p != path):
            continue  # covered by a parent bind
        out.append(str(path))
    return out


def build_bwrap_argv(spec: SandboxSpec, bwrap: str = "bwrap",
                     python_dirs: list[str] | None = None) -> list[str]:
    """The full bubblewrap command line for `spec` (pure: no side effects)."""
    argv = [bwrap]
    for directory in SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), directory]
        elif path.exists():
            argv += ["--ro-bind", directory, directory]
    # The fresh /tmp, /proc and /dev come before the binds below: a bind placed earlier under
    # /tmp (a virtual environment or a checkout in /tmp) would be hidden by the tmpfs.
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for directory in (python_dirs if python_dirs is not None else python_binds()):
        argv += ["--ro-bind", directory, directory]
    argv += ["--ro-bind", str(spec.data_dir), INSIDE_DATA,
             "--ro-bind", str(spec.model_dir), INSIDE_MODEL,
             "--bind", str(spec.workspace), INSIDE_WORKSPACE,
             "--dir", INSIDE_RUN]
    if spec.socket_path:
        argv += ["--bind", str(spec.socket_path), INSIDE_SOCKET]
    if spec.env_sockets:
        argv += ["--bind", str(spec.env_sockets), INSIDE_ENV_SOCKETS]
    if spec.command_log:
        argv += ["--bind", str(spec.command_log), INSIDE_COMMAND_LOG]
    for inside, host in sorted(spec.extra_ro.items()):
        argv += ["--ro-bind", str(host), inside]
    argv += ["--unshare-all", "--die-with-parent", "--new-session",
             "--chdir", INSIDE_WORKSPACE, "--"]
    return argv + list(spec.command)


def agent_env(spec: SandboxSpec, confined: bool) -> dict[str, str]:
    """The agent's environment: a clean base, the runtime's A2C_* values and the path variables."""
    if confined:
        workspace, data, model = INSIDE_WORKSPACE, INSIDE_DATA, INSIDE_MODEL
        socket, command_log, home = INSIDE_SOCKET, INSIDE_COMMAND_LOG, "/tmp"
    else:
        workspace, data, model = str(spec.workspace), str(spec.data_dir), str(spec.model_dir)
        socket, command_log = str(spec.socket_path), str(spec.command_log)
        home = str(spec.workspace / ".home")
        Path(home).mkdir(parents=True, exist_ok=True)
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TMPDIR": "/tmp",
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": f"{home}/.hf",
        "TOKENIZERS_PARALLELISM": "false",
        "VIRTUAL_ENV": sys.prefix,
    }
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TERM"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(spec.env)
    env.update({
        "A2C_WORKSPACE": workspace,
        "A2C_OUTPUT_DIR": f"{workspace}/output",
        "A2C_DATA_DIR": data,
        "A2C_BASE_MODEL": model,
        "A2C_GRADER_URL": f"unix:{socket}",
        "A2C_COMMAND_LOG": command_log,
        MARKER_VAR: spec.marker,
    })
    return env


class LocalProcess:
    def __init__(self, popen: subprocess.Popen, marker: str, log_handle):
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: the leader's pid is the group id
        self.marker = marker
        self._log = log_handle

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 3.0) -> dict:
        """Stop the whole tree (SIGTERM, `grace` seconds, SIGKILL) and reap the leader."""
        report = kill_tree(self.pid, self.pgid, self.marker, grace=grace, reap=self.popen.poll)
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self.close()
        return report

    def close(self) -> None:
        if self._log and not self._log.closed:
            self._log.close()


class LocalBackend:
    name = "local"

    def __init__(self, use_bwrap: bool | None = None):
        found = bwrap_path()
        if use_bwrap is None:
            use_bwrap = bool(found) and bwrap_works(found)
        elif use_bwrap and not (found and bwrap_works(found)):
            raise RunError("bubblewrap (bwrap) is not installed or cannot create namespaces here")
        self.bwrap = found if use_bwrap else None
        self.isolation = "bubblewrap" if self.bwrap else "none"

    def warning(self) -> str | None:
        if self.bwrap:
            return None
        return ("WARNING: bubblewrap (bwrap) is not available: the agent runs UNCONFINED as a "
                "plain process group and can read the held-out data, the grader's token and the "
                "run record. This run is recorded with isolation: none. Install bubblewrap "
                "(apt-get install bubblewrap) for a meaningful score.")

    def command_line(self, spec: SandboxSpec) -> list[str]:
        return build_bwrap_argv(spec, self.bwrap) if self.bwrap else list(spec.command)

    def start(self, spec: SandboxSpec) -> LocalProcess:
        if not self.bwrap:
            message = self.warning()
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        env = agent_env(spec, confined=bool(self.bwrap))
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        if spec.command_log:
            spec.command_log.touch(exist_ok=True)
        log = open(spec.log_path, "ab", buffering=0)
        try:
            popen = subprocess.Popen(self.command_line(spec), cwd=spec.workspace, env=env,
                                     stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            log.close()
            raise RunError(f"could not start the agent: {exc}") from exc
        return LocalProcess(popen, spec.marker, log)
