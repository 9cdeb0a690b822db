"""The agent's container: its configuration (a pure function), the a2c code it runs, the process.

The container sees what bubblewrap shows (local.py): `/workspace` (read-write), `/data` and
`/model` (read-only), the grader's socket at `/run/a2c/grader.sock`, a scaffold's driver socket
and home, the environment service proxies' sockets at `/run/a2c/env`, the command log, the agent's
folder and the hooks (read-only), and the a2c packages an agent imports at /opt/a2c/lib
(read-only; `stage_agent_library`: the same allow-list as bubblewrap's, view.py: what the
agents import of a2c and nothing else). Everything else comes from the
image. Network `none`, the agent's unprivileged uid, no capability, no-new-privileges, a
read-only root filesystem with the run's own /tmp (RUN/agent-tmp, else a private tmpfs), the
agent's GPUs only (`gpu_requests`), and the task's memory, CPU and pids limits. Its disk budget:
the root is read-only, so docker's `--storage-opt size=` (which bounds only the writable root
layer, and only on some storage drivers) has nothing to bound; the host-side watcher (disk.py)
measures the bind-mounted folders, and a tmpfs /tmp has the budget as its size.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from a2c.runtime.sandbox import SandboxSpec, causes, view
from a2c.runtime.sandbox.cgroups import CGROUP_ROOT, parse_size
from a2c.runtime.sandbox.disk import DiskWatcher, tmpfs_size, watched_parts
from a2c.runtime.sandbox.local import (
    INSIDE_COMMAND_LOG,
    INSIDE_DATA,
    INSIDE_DRIVER_SOCKET,
    INSIDE_ENV_SERVICE_SOCKETS,
    INSIDE_HOME,
    INSIDE_MODEL,
    INSIDE_SOCKET,
    INSIDE_WORKSPACE,
    agent_env,
)
from a2c.runtime.sandbox.privileges import AgentIds, agent_ids

INSIDE_LIB = "/opt/a2c/lib"       # the a2c packages an agent imports (PYTHONPATH)
LIB_DIR = view.VIEW_DIR           # RUN/agent-lib: their staged copy, mounted read-only
DEFAULT_PIDS = 4096
HOST_ONLY_ENV = ("PATH", "VIRTUAL_ENV")   # the host's venv means nothing inside the image


def container_env(spec: SandboxSpec) -> dict[str, str]:
    """The local backend's confined environment, less the host's PATH and venv (the image's
    own PATH holds its Python), plus PYTHONPATH for the mounted a2c packages."""
    env = {k: v for k, v in agent_env(spec, confined=True).items() if k not in HOST_ONLY_ENV}
    env["PYTHONPATH"] = INSIDE_LIB
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if spec.gpu_ids and visible and not visible.startswith("GPU-"):
        # The NVIDIA runtime numbers a container's GPUs from 0: a host index would name another
        # device (or none) inside. UUIDs, where the driver publishes them, name the same device.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(k) for k in range(len(spec.gpu_ids)))
    return env


def container_kwargs(spec: SandboxSpec, image: str, ids: AgentIds | None = None,
                     library: Path | None = None) -> dict:
    """Keyword arguments for `client.containers.run(**kwargs)` (pure; no engine needed).

    The container runs as the agent's unprivileged uid (`privileges.agent_ids`), never as root:
    without user-namespace remapping root in a container is root on the host. Swap is capped at
    the memory limit (no swap), so an agent past it is OOM-killed, not slowed."""
    ids = ids or agent_ids()
    volumes = {
        str(spec.workspace): {"bind": INSIDE_WORKSPACE, "mode": "rw"},
        str(spec.data_dir): {"bind": INSIDE_DATA, "mode": "ro"},
        str(spec.model_dir): {"bind": INSIDE_MODEL, "mode": "ro"},
    }
    if spec.socket_path:
        volumes[str(spec.socket_path)] = {"bind": INSIDE_SOCKET, "mode": "rw"}
    if spec.env_service_sockets:
        volumes[str(spec.env_service_sockets)] = {"bind": INSIDE_ENV_SERVICE_SOCKETS,
                                                  "mode": "rw"}
    if spec.driver_socket:   # the container's only way to a driver model (network: none)
        volumes[str(spec.driver_socket)] = {"bind": INSIDE_DRIVER_SOCKET, "mode": "rw"}
    if spec.agent_home:
        volumes[str(spec.agent_home)] = {"bind": INSIDE_HOME, "mode": "rw"}
    if spec.command_log:
        volumes[str(spec.command_log)] = {"bind": INSIDE_COMMAND_LOG, "mode": "rw"}
    for inside, host in sorted(spec.extra_ro.items()):
        volumes[str(host)] = {"bind": inside, "mode": "ro"}
    if library is not None:
        volumes[str(library)] = {"bind": INSIDE_LIB, "mode": "ro"}
    if spec.agent_tmp:   # the run's own /tmp (RUN/agent-tmp): the recorder sees scripts run there
        volumes[str(spec.agent_tmp)] = {"bind": "/tmp", "mode": "rw"}
    kwargs = {
        "image": image,
        "command": list(spec.command),
        "detach": True,
        "working_dir": INSIDE_WORKSPACE,
        "environment": container_env(spec),
        "volumes": volumes,
        "network_mode": spec.network or "none",
        "labels": {"a2c.sandbox": spec.marker},
        "init": True,               # PID 1 reaps zombies; when it dies, the namespace dies
        "read_only": True,          # root filesystem read-only: only the mounts are writable
        # a tmpfs /tmp (no RUN/agent-tmp): bounded in the kernel by the disk budget (disk.py)
        "tmpfs": {} if spec.agent_tmp else {"/tmp": f"rw,exec,size={_tmp_size(spec)}"},
        "security_opt": ["no-new-privileges"],
        "cap_drop": ["ALL"],
        "user": f"{ids.uid}:{ids.gid}",
        "group_add": [],
        "pids_limit": int(spec.pids or DEFAULT_PIDS),
        "stop_signal": "SIGTERM",
        "ipc_mode": "private",
    }
    if spec.mem_limit:
        kwargs["mem_limit"] = spec.mem_limit
        kwargs["memswap_limit"] = spec.mem_limit
    if spec.cpus:
        kwargs["nano_cpus"] = int(spec.cpus * 1e9)
    if spec.gpu_ids:
        kwargs["device_requests"] = gpu_requests(spec.gpu_ids)
    return kwargs


def _tmp_size(spec: SandboxSpec) -> int:
    return tmpfs_size(parse_size(spec.disk_limit) if spec.disk_limit else None)


def gpu_requests(gpu_ids) -> list:
    """The agent's GPUs, by host index, through the NVIDIA container runtime: exactly the ids
    the run gave the agent (never the grader's, which runs on the host with its own ids)."""
    import docker.types
    return [docker.types.DeviceRequest(driver="nvidia", device_ids=[str(i) for i in gpu_ids],
                                       capabilities=[["gpu"]])]


def stage_agent_library(dest: Path) -> Path:
    """DEST/a2c/...: the agent's allow-list of a2c (view.stage: what its entry modules import,
    nothing else), the same code bubblewrap shows, mounted read-only at INSIDE_LIB. Without
    bytecode: the image's Python compiles its own."""
    return view.stage(dest)


def exit_cause(state: dict, mem_limit: str | None, pid_refusals: int = 0,
               pids_limit: int | None = None) -> str | None:
    """Why the container ended, in words, where the exit code alone does not say it
    (causes.py): out of memory only on the engine's OOMKilled, process limit when the
    container's pids.events counted a refused fork, else the signal."""
    code = state.get("ExitCode")
    return causes.name(code if isinstance(code, int) else None,
                       oom_kills=1 if state.get("OOMKilled") else 0, pid_refusals=pid_refusals,
                       mem_limit=mem_limit, pids_limit=pids_limit, who="the container")


def cgroup_folder(pid: int | None, controller: str = "pids",
                  root: Path = CGROUP_ROOT) -> Path | None:
    """The host folder of the cgroup that process `pid` (the container's init) is in, for
    `controller` (v1) or the unified one (v2); None when it cannot be read."""
    if not pid:
        return None
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        _, names, path = (line.split(":", 2) + ["", ""])[:3]
        if controller in names.split(","):
            folder = root / controller / path.lstrip("/")
            return folder if folder.is_dir() else None
    for line in text.splitlines():   # v2: "0::/system.slice/docker-<id>.scope"
        if line.startswith("0::"):
            folder = root / line[3:].lstrip("/")
            return folder if (folder / "cgroup.controllers").is_file() else None
    return None


OOM_SETTLE_S = 3.0   # how long an unexplained SIGKILL under a memory limit is looked at again


class DockerProcess:
    """The running container, seen as the runtime's sandbox process (poll, wait, stop)."""

    def __init__(self, container, log_path: Path, mem_limit: str | None = None,
                 pids_limit: int | None = None):
        self.container = container
        self.pid = None
        self.cause: str | None = None
        self._rc: int | None = None
        self._mem_limit = mem_limit
        self._pids_limit = pids_limit
        self._pids_events: Path | None = None   # the container's pids.events (while it runs)
        self._refusals = 0                        # forks its pids limit refused, last read
        self.disk: DiskWatcher | None = None     # the disk budget's watcher (disk.py)
        self.limits: dict = {}                   # run.json's `limits` (the disk budget's)
        self.limits_warning: str | None = None
        self._since = int(time.time()) - 1
        self._stopping = False
        self._log_path = log_path
        self._pump = threading.Thread(target=self._copy_logs, daemon=True)
        self._pump.start()

    def _copy_logs(self) -> None:
        try:
            with open(self._log_path, "ab", buffering=0) as handle:
                for chunk in self.container.logs(stream=True, follow=True):
                    handle.write(chunk)
        except Exception:  # noqa: BLE001 - the container went away under the stream
            pass

    @property
    def returncode(self) -> int | None:
        return self._rc

    def watch_disk(self, spec: SandboxSpec) -> None:
        """Measure what the agent wrote (its bind-mounted folders, its logs, the engine's copy
        of its stdout) every few seconds; past `spec.disk_limit`, stop the container."""
        self._read_refusals()
        if not spec.disk_limit:
            return
        engine_log = (getattr(self.container, "attrs", None) or {}).get("LogPath")
        parts = watched_parts(spec.workspace, spec.agent_tmp, spec.agent_home,
                              files=(spec.log_path, spec.command_log,
                                     Path(engine_log) if engine_log else None))
        self.disk = DiskWatcher(parts, parse_size(spec.disk_limit), self.stop,
                                pids=self.processes)
        self.limits = {"disk": self.disk.record}
        self.disk.start()

    @property
    def stopped_for(self) -> str | None:
        """"disk_budget" when the disk watcher stopped the container (the runner's reason)."""
        return "disk_budget" if self.disk is not None and self.disk.fired.is_set() else None

    @property
    def stop_report(self) -> dict | None:
        return self.disk.wait_stopped() if self.disk is not None else None

    def _read_refusals(self) -> None:
        """pids.events `max` of the container's cgroup, read while it runs (the engine removes
        the folder with the container, and its state has no such counter)."""
        if self._pids_events is None:
            state = (getattr(self.container, "attrs", None) or {}).get("State") or {}
            folder = cgroup_folder(state.get("Pid"))
            if folder is None:
                return
            self._pids_events = folder / "pids.events"
        try:
            match = re.search(r"^max (\d+)", self._pids_events.read_text(), re.MULTILINE)
        except OSError:
            return
        if match:
            self._refusals = max(self._refusals, int(match.group(1)))

    def _ended(self, state: dict) -> int:
        self._rc = int(state.get("ExitCode", -1))
        if self.disk is not None and self.disk.fired.is_set():
            self.cause = self.disk.cause
        else:
            self.cause = exit_cause(state, self._mem_limit, self._refusals, self._pids_limit)
        return self._rc

    def poll(self) -> int | None:
        if self._rc is None:
            self.container.reload()
            if self.container.status == "running":
                self._read_refusals()
            if self.container.status in ("exited", "dead"):
                if self.disk is not None and self.disk.fired.is_set():
                    self.disk.wait_stopped()
                state = dict(self.container.attrs["State"])
                if (self._mem_limit and not self._stopping and state.get("ExitCode") == 137
                        and not state.get("OOMKilled") and self._oom_seen()):
                    state["OOMKilled"] = True
                self._ended(state)
        return self._rc

    def _oom_seen(self) -> bool:
        """Docker can take the kernel's OOM kill in after the container's exit (two events
        that race): a SIGKILL nobody sent, under a memory limit, is looked at again, in the
        container's state and the engine's `oom` events, for up to OOM_SETTLE_S."""
        deadline = time.monotonic() + OOM_SETTLE_S
        while True:
            try:
                self.container.reload()
                if self.container.attrs["State"].get("OOMKilled"):
                    return True
                if any(True for _ in self.container.client.events(
                        since=self._since, until=int(time.time()) + 1, decode=True,
                        filters={"container": self.container.id, "event": "oom"})):
                    return True
            except Exception:  # noqa: BLE001 - the engine cannot say: the exit code stands
                return False
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.25)

    def wait(self, timeout: float | None = None) -> int | None:
        import requests
        try:
            self.container.wait(timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return None
        return self.poll()

    def exit_cause(self) -> str | None:
        return self.cause

    def processes(self) -> list[int]:
        """Host pids of every process left in the container (none once it stopped)."""
        try:
            top = self.container.top(ps_args="-e -o pid")
        except Exception:  # noqa: BLE001 - not running: nothing in it
            return []
        return [int(row[0]) for row in top.get("Processes") or [] if row and row[0].isdigit()]

    def stop(self, grace: float = 3.0) -> dict:
        """SIGTERM to the container's init, `grace` seconds, then SIGKILL: the pid namespace
        dies with its init, so every process in it goes, setsid'ed daemons included."""
        start = time.monotonic()
        self._stopping = True        # a SIGKILL from here on is ours, not the kernel's
        if self.disk is not None:
            self.disk.cancel()
        before = self.processes()
        try:
            self.container.stop(timeout=max(1, int(round(grace))))
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.wait(timeout=30)
        survivors = self.processes()
        return {"terminated": len(before), "killed": 0 if self._rc not in (137,) else len(before),
                "survivors": survivors, "elapsed_s": round(time.monotonic() - start, 3)}

    def close(self) -> None:
        """Remove the container once it ended (its log already copied)."""
        if self._rc is None:
            if self.disk is not None:
                self.disk.cancel()
            return
        if self.disk is not None:
            self.disk.finish()
        self._pump.join(timeout=5)
        try:
            self.container.remove(force=True)
        except Exception:  # noqa: BLE001 - removed already
            pass
