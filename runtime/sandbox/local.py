"""The `local` backend: a process group in the run's workspace, inside bubblewrap where present.

With bubblewrap the agent sees a minimal filesystem: the system read-only (/usr, /lib, /lib64,
/bin, /sbin, /etc), the Python interpreter, the virtual environment and, of a2c, only what the
agents import, staged per run (view.py's allow-list; installed packages' held-out data
covered), `/data` and `/model` read-only, `/workspace` read-write,
the grader's socket at `/run/a2c/grader.sock`, its own /proc and /dev, /tmp = RUN/agent-tmp
(kept for the recorder), and the run's GPUs' device nodes only (gpus.py). Every namespace is
unshared (no network but its own loopback), no user namespace can be made inside, it dies with
the runtime, and it runs in a new session. bubblewrap's options go through `--args FD` and the
environment names /run/a2c/venv, so no cmdline or environment inside shows a host path. The task's memory, CPU and process limits hold for its whole tree through a cgroup of
the run's own (cgroups.py; a limit the host cannot enforce is said and recorded). The held-out
data, the grader's directory (token, config) and the run record are not mounted, so they do not
exist inside. The disk budget holds for everything it can write (disk.py: workspace, /tmp, home,
its logs), measured from the host; a tmpfs /tmp (no RUN/agent-tmp) is also bounded in the kernel
(`--size`). The agent never runs as root (privileges.py): a root
runtime makes it an unprivileged uid with no capabilities. Without bubblewrap the agent runs
unconfined, with a loud warning and `isolation: none`, and never as root unless
`A2C_UNSAFE_ROOT_AGENT=1` says so for debugging.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

from a2c.errors import RunError
from a2c.runtime.sandbox import SandboxSpec, causes, gpus, view
from a2c.runtime.sandbox.bwrap import (  # noqa: F401 - bwrap_path, bwrap_works: re-exported
    SYSTEM_DIRS,
    Bwrap,
    bwrap_path,
    bwrap_works,
    parent_dirs,
    size_works,
)
from a2c.runtime.sandbox.cgroups import AgentCgroup, parse_size
from a2c.runtime.sandbox.disk import DiskWatcher, tmpfs_size, watched_parts
from a2c.runtime.sandbox.privileges import (
    UNSAFE_ROOT_VAR,
    AgentIds,
    agent_ids,
    drop_argv,
    grant_agent,
    is_root,
    nested_userns_argv,
    nested_userns_works,
    refuse_root_without_sandbox,
    setpriv_path,
)
from a2c.runtime.sandbox.proctree import MARKER_VAR, collect, kill_tree

INSIDE_WORKSPACE = "/workspace"
INSIDE_DATA = "/data"
INSIDE_MODEL = "/model"
INSIDE_RUN = "/run/a2c"
INSIDE_SOCKET = "/run/a2c/grader.sock"
INSIDE_ENV_SERVICE_SOCKETS = "/run/a2c/env"   # environment service proxies (env_services/proxy.py)
INSIDE_COMMAND_LOG = "/run/a2c/commands.log"
INSIDE_DRIVER_SOCKET = "/run/a2c/driver.sock"   # the driver gateway (runtime/driver_gateway)
INSIDE_HOME = "/run/a2c/home"                   # a scaffold's HOME (RUN/agent-home)
INSIDE_VENV = "/run/a2c/venv"   # a symlink to the venv: PATH and VIRTUAL_ENV name no host path
# every namespace but the user namespace (the root case; see privileges.py)
NAMESPACES = ("pid", "net", "ipc", "uts", "cgroup-try")


def python_binds() -> list[str]:
    """Host folders the agent's Python needs: interpreter and venv (its a2c: `view.agent_view`)."""
    return view.python_binds(SYSTEM_DIRS, a2c=False)


def view_dir(spec: SandboxSpec) -> Path:
    """RUN/agent-lib: the agent's allow-list of a2c, staged at each start (view.stage)."""
    return spec.workspace.parent / view.VIEW_DIR


def build_bwrap_argv(spec: SandboxSpec, bwrap: str = "bwrap",
                     python_dirs: list[str] | None = None,
                     ids: AgentIds | None = None, setpriv: str = "setpriv",
                     lock_userns: bool = False, a2c_view: Path | None = None,
                     tmp_size: bool = False) -> list[str]:
    """The full bubblewrap command line for `spec` (pure: no side effects). `a2c_view`: the
    staged allow-list of a2c (view.stage; None: no a2c code inside). `tmp_size`: this
    bubblewrap takes `--size`, so a tmpfs /tmp (no RUN/agent-tmp) is bounded by the disk budget.

    With `ids` (the runtime is root) the sandbox has no user namespace and its first program,
    setpriv, becomes `ids` with every capability dropped, then (`lock_userns`) an unprivileged
    bubblewrap takes user namespaces away from it (privileges.nested_userns_argv); without
    `ids`, bubblewrap runs unprivileged in a user namespace with every capability dropped and
    no further user namespace (`--disable-userns`).
    """
    box = Bwrap(bwrap).system(SYSTEM_DIRS)
    # The fresh /tmp, /proc and /dev come before the binds below: a bind placed earlier under
    # /tmp (a virtual environment or a checkout in /tmp) would be hidden by the tmpfs.
    box.proc().dev()
    if spec.agent_tmp:   # RUN/agent-tmp (0700, the agent's): the recorder sees what it ran
        box.bind(spec.agent_tmp, "/tmp")
    else:
        limit = parse_size(spec.disk_limit) if spec.disk_limit else None
        box.tmpfs("/tmp", perms="1777", size=tmpfs_size(limit) if tmp_size else None)
    box.add(*gpus.bwrap_args(spec.gpu_ids))   # only the run's GPUs' nodes
    python_dirs = python_dirs if python_dirs is not None else python_binds()
    shown = view.agent_view([*SYSTEM_DIRS, *python_dirs], a2c_view)   # a2c: the allow-list
    box.add(*parent_dirs([*python_dirs, *(inside for _, inside in shown.binds)]))
    for directory in python_dirs:
        box.ro_bind(directory)
    for staged, inside in shown.binds:
        box.ro_bind(staged, inside)
    for directory in shown.empty_dirs:
        box.tmpfs(directory).remount_ro(directory)
    for path in shown.empty_files:
        box.hide_file(path)
    box.ro_bind(spec.data_dir, INSIDE_DATA).ro_bind(spec.model_dir, INSIDE_MODEL)
    box.bind(spec.workspace, INSIDE_WORKSPACE).dir(INSIDE_RUN).symlink(sys.prefix, INSIDE_VENV)
    for host, inside in ((spec.socket_path, INSIDE_SOCKET),
                         (spec.env_service_sockets, INSIDE_ENV_SERVICE_SOCKETS),
                         (spec.driver_socket, INSIDE_DRIVER_SOCKET), (spec.agent_home, INSIDE_HOME),
                         (spec.command_log, INSIDE_COMMAND_LOG)):
        if host:
            box.bind(host, inside)
    for inside, host in sorted(spec.extra_ro.items()):
        box.ro_bind(host, inside)
    if ids is not None:  # root: no user namespace (uid 0 in one is root outside), setpriv drops
        box.unshare(*NAMESPACES).caps("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
    else:
        box.unshare("all", "user").disable_userns().caps()
    box.die_with_parent().new_session().chdir(INSIDE_WORKSPACE)
    first: list[str] = []
    if ids is not None:
        first = drop_argv(ids, setpriv)
        if lock_userns:
            first += nested_userns_argv(bwrap)
    return box.command(*first, *spec.command)


def args_fd(argv: list[str]) -> int:
    """A memory file holding bubblewrap's options NUL-separated, for its `--args FD`: the
    sandbox's pid 1 (bubblewrap's own init) then shows `bwrap --args N -- COMMAND` as its
    command line (COMMAND names inside paths only: setpriv, the agent's launcher), not the host
    paths of the run, the venv and the cache that its options name."""
    fd = os.memfd_create("a2c-bwrap-args", 0)   # not close-on-exec: bubblewrap inherits it
    os.write(fd, b"".join(a.encode() + b"\0" for a in argv))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def agent_env(spec: SandboxSpec, confined: bool) -> dict[str, str]:
    """The agent's environment: a clean base, the runtime's A2C_* values and the path variables."""
    venv, tmp = sys.prefix, "/tmp"
    if confined:
        workspace, data, model = INSIDE_WORKSPACE, INSIDE_DATA, INSIDE_MODEL
        socket, command_log, home = INSIDE_SOCKET, INSIDE_COMMAND_LOG, "/tmp"
        driver_socket, venv = INSIDE_DRIVER_SOCKET, INSIDE_VENV
        if spec.agent_home:
            home = INSIDE_HOME
    else:
        workspace, data, model = str(spec.workspace), str(spec.data_dir), str(spec.model_dir)
        socket, command_log = str(spec.socket_path), str(spec.command_log)
        driver_socket = str(spec.driver_socket)
        home = str(spec.agent_home or spec.workspace / ".home")
        Path(home).mkdir(parents=True, exist_ok=True)
        tmp = str(spec.agent_tmp) if spec.agent_tmp else tmp
    venv_bin = f"{venv}/bin" if Path(sys.executable).parent == Path(sys.prefix) / "bin" \
        else str(Path(sys.executable).parent)
    env = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TMPDIR": tmp,
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": f"{home}/.hf",
        "TOKENIZERS_PARALLELISM": "false",
        "VIRTUAL_ENV": venv,
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
    if spec.driver_socket:
        env["A2C_DRIVER_SOCKET"] = driver_socket
    if spec.agent_home:
        env["A2C_AGENT_HOME"] = home
    if spec.gpu_ids:   # by UUID where the driver names them (gpus.visible_devices)
        env["CUDA_VISIBLE_DEVICES"] = gpus.visible_devices(spec.gpu_ids)
    return env


class LocalProcess:
    def __init__(self, popen: subprocess.Popen, marker: str, log_handle,
                 cgroup: AgentCgroup | None = None):
        self.cgroup = cgroup    # the run's resource limits (cgroups.py); run.json's `limits`
        self.limits = cgroup.record() if cgroup else {}
        self.limits_warning = cgroup.warning() if cgroup else None
        self._cause: str | None = None
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid  # start_new_session: the leader's pid is the group id
        self.marker = marker
        self._log = log_handle
        self.disk: DiskWatcher | None = None   # the disk budget's watcher (disk.py)
        self._closing = threading.Lock()

    def watch_disk(self, spec: SandboxSpec) -> None:
        """Measure what the agent wrote every few seconds; past `spec.disk_limit`, stop it."""
        if not spec.disk_limit:
            return
        parts = watched_parts(spec.workspace, spec.agent_tmp, spec.agent_home,
                              files=(spec.log_path, spec.command_log))
        self.disk = DiskWatcher(parts, parse_size(spec.disk_limit), self.stop, pids=self.procs)
        self.limits = {**self.limits, "disk": self.disk.record}
        self.disk.start()

    def procs(self) -> set[int]:
        """The agent's processes: its cgroup's, else its tree and group and marker."""
        if self.cgroup is not None and self.cgroup.active:
            return self.cgroup.procs()
        return collect(self.pid, self.pgid, self.marker)

    @property
    def stopped_for(self) -> str | None:
        """"disk_budget" when the disk watcher stopped the agent (the runner's reason)."""
        return "disk_budget" if self.disk is not None and self.disk.fired.is_set() else None

    @property
    def stop_report(self) -> dict | None:
        return self.disk.wait_stopped() if self.disk is not None else None

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        rc = self.popen.poll()
        if rc is not None and self.disk is not None and self.disk.fired.is_set():
            self.disk.wait_stopped()      # the whole tree gone before the end is reported
        return rc

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 3.0) -> dict:
        """Stop the whole tree (SIGTERM, `grace` seconds, SIGKILL) and reap the leader."""
        if self.disk is not None:
            self.disk.cancel()
        report = kill_tree(self.pid, self.pgid, self.marker, grace=grace, reap=self.popen.poll)
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self.close()
        return report

    def close(self) -> None:
        if self.disk is not None:
            self.disk.finish()
        with self._closing:
            if self._log and not self._log.closed:
                self._log.close()
            if self.cgroup is not None and self.cgroup.active:   # what is left dies with it
                self._cause = self.cgroup.exit_cause(self.popen.poll())
                self.cgroup.close()

    def exit_cause(self) -> str | None:
        """Why the agent ended where its exit code does not say (causes.py): the disk budget,
        the cgroup's OOM kill or refused fork, or the signal that ended it."""
        if self.disk is not None and self.disk.fired.is_set():
            return self.disk.cause
        if self._cause is None and self.cgroup is not None and self.cgroup.active:
            return self.cgroup.exit_cause(self.popen.poll())
        return self._cause or causes.name(self.popen.poll())


def _inside(root: Path, paths) -> list[Path]:
    """The paths that lie inside `root` (the run directory's own trees, not a shared cache)."""
    root = root.resolve()
    return [Path(p) for p in paths if root in Path(p).resolve().parents]


def grants(spec: SandboxSpec) -> dict:
    """What the agent's uid gets on the host (privileges.grant_agent), for every backend: the
    workspace and its home (chowned), the command log, the grader's and the driver gateway's
    sockets, the environment service proxies' folder, and group read on the run's read-only
    trees."""
    return {"writable_trees": [spec.workspace, *[p for p in (spec.agent_home, spec.agent_tmp)
                                                 if p]],
            "writable_files": [spec.command_log] if spec.command_log else [],
            "sockets": [p for p in (spec.socket_path, spec.driver_socket) if p],
            "socket_dirs": [spec.env_service_sockets] if spec.env_service_sockets else [],
            "readable_trees": [spec.data_dir, *_inside(spec.workspace.parent,
                                                       spec.extra_ro.values())]}


class LocalBackend:
    """The local backend. As root it needs bubblewrap and setpriv: the agent runs as the
    unprivileged uid of `privileges.agent_ids` (refused otherwise; see privileges.py)."""

    name = "local"

    def __init__(self, use_bwrap: bool | None = None):
        found = bwrap_path()
        if use_bwrap is None:
            use_bwrap = bool(found) and bwrap_works(found)
        elif use_bwrap and not (found and bwrap_works(found)):
            raise RunError("bubblewrap (bwrap) is not installed or cannot create namespaces here")
        self.bwrap = found if use_bwrap else None
        self.isolation = "bubblewrap" if self.bwrap else "none"
        self.ids: AgentIds | None = None
        self.setpriv = "setpriv"
        self.lock_userns = False
        self.args_via_fd = True   # bubblewrap's options through --args FD (the bench compares)
        if not self.bwrap:
            refuse_root_without_sandbox()
        elif is_root():
            self.ids = agent_ids()
            self.setpriv = setpriv_path()
            self.lock_userns = nested_userns_works(self.bwrap, self.setpriv, self.ids)

    def warning(self) -> str | None:
        if self.bwrap:
            return None
        message = ("WARNING: bubblewrap (bwrap) is not available: the agent runs UNCONFINED as a "
                   "plain process group and can read the held-out data, the grader's token and "
                   "the run record. This run is recorded with isolation: none. Install "
                   "bubblewrap (apt-get install bubblewrap) for a meaningful score.")
        if is_root():
            message += (f" The agent runs AS ROOT ({UNSAFE_ROOT_VAR}=1): it can change anything "
                        "on this machine. Debugging only.")
        return message

    def command_line(self, spec: SandboxSpec) -> list[str]:
        if not self.bwrap:
            return list(spec.command)
        return build_bwrap_argv(spec, self.bwrap, ids=self.ids, setpriv=self.setpriv,
                                lock_userns=self.lock_userns, a2c_view=view_dir(spec),
                                tmp_size=size_works(self.bwrap))

    def _grant(self, spec: SandboxSpec) -> None:
        if self.ids is None:
            return
        grant_agent(self.ids, **grants(spec))

    def start(self, spec: SandboxSpec) -> LocalProcess:
        if not self.bwrap:
            refuse_root_without_sandbox()
            message = self.warning()
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        env = agent_env(spec, confined=bool(self.bwrap))
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        if spec.command_log:
            spec.command_log.touch(exist_ok=True)
        if spec.agent_tmp:
            spec.agent_tmp.mkdir(mode=0o700, exist_ok=True)
            os.chmod(spec.agent_tmp, 0o700)
        self._grant(spec)
        if self.bwrap:   # what the agents import of a2c, nothing else (view.py)
            view.stage(view_dir(spec), bytecode=True)
        log = open(spec.log_path, "ab", buffering=0)
        cgroup = AgentCgroup.create(spec.marker, spec.mem_limit, spec.cpus, spec.pids)
        argv, fds = self.command_line(spec), ()
        if self.bwrap and self.args_via_fd:   # a memfd: no host path in any cmdline inside
            cut = argv.index("--")   # bubblewrap takes the command itself from its argv
            fds = (args_fd(argv[1:cut]),)
            argv = [argv[0], "--args", str(fds[0]), *argv[cut:]]
        try:
            popen = subprocess.Popen(argv, cwd=spec.workspace, env=env,
                                     stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=cgroup.enter if cgroup.active else None,
                                     pass_fds=fds)
        except (OSError, subprocess.SubprocessError) as exc:
            log.close()
            cgroup.close()
            raise RunError(f"could not start the agent: {exc}") from exc
        finally:
            for fd in fds:
                os.close(fd)
        proc = LocalProcess(popen, spec.marker, log, cgroup)
        proc.watch_disk(spec)
        return proc
