"""The `docker` backend: build the bundle's image and run the agent in a container.

The container sees the same layout as under bubblewrap: `/workspace` (read-write), `/data` and
`/model` (read-only), the grader's Unix socket at `/run/a2c/grader.sock`, and nothing else of the
host. GPUs are requested with `device_requests`, memory and CPUs are capped, and the network is
`none` unless the task's environment needs one. `container_kwargs` is a pure function so the
configuration is testable without an engine; with no engine reachable every entry point raises
one clear `RunError`.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from a2c.contracts.bundle import MANIFEST
from a2c.errors import RunError
from a2c.runtime.sandbox import SandboxSpec
from a2c.runtime.sandbox.local import (
    INSIDE_COMMAND_LOG,
    INSIDE_DATA,
    INSIDE_DRIVER_SOCKET,
    INSIDE_HOME,
    INSIDE_MODEL,
    INSIDE_SOCKET,
    INSIDE_WORKSPACE,
    grants,
)
from a2c.runtime.sandbox.privileges import AgentIds, agent_ids, grant_agent, is_root
from a2c.runtime.sandbox.proctree import MARKER_VAR

NO_ENGINE = ("docker backend: no Docker engine is reachable ({detail}); start dockerd or use "
             "--backend local")


def container_env(spec: SandboxSpec) -> dict[str, str]:
    home = INSIDE_HOME if spec.agent_home else "/tmp"
    env = {"HOME": home, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    env.update(spec.env)
    env.update({
        "A2C_WORKSPACE": INSIDE_WORKSPACE,
        "A2C_OUTPUT_DIR": f"{INSIDE_WORKSPACE}/output",
        "A2C_DATA_DIR": INSIDE_DATA,
        "A2C_BASE_MODEL": INSIDE_MODEL,
        "A2C_GRADER_URL": f"unix:{INSIDE_SOCKET}",
        "A2C_COMMAND_LOG": INSIDE_COMMAND_LOG,
        MARKER_VAR: spec.marker,
    })
    if spec.driver_socket:
        env["A2C_DRIVER_SOCKET"] = INSIDE_DRIVER_SOCKET
    if spec.agent_home:
        env["A2C_AGENT_HOME"] = INSIDE_HOME
    return env


def container_kwargs(spec: SandboxSpec, image: str, ids: AgentIds | None = None) -> dict:
    """Keyword arguments for `client.containers.run(**kwargs)` (pure; no engine needed).

    The container runs as the agent's unprivileged uid (`privileges.agent_ids`), never as root:
    without user-namespace remapping root in a container is root on the host."""
    ids = ids or agent_ids()
    volumes = {
        str(spec.workspace): {"bind": INSIDE_WORKSPACE, "mode": "rw"},
        str(spec.data_dir): {"bind": INSIDE_DATA, "mode": "ro"},
        str(spec.model_dir): {"bind": INSIDE_MODEL, "mode": "ro"},
    }
    if spec.socket_path:
        volumes[str(spec.socket_path)] = {"bind": INSIDE_SOCKET, "mode": "rw"}
    if spec.env_sockets:
        volumes[str(spec.env_sockets)] = {"bind": "/run/a2c/env", "mode": "rw"}
    if spec.driver_socket:   # the container's only way to a driver model (network: none)
        volumes[str(spec.driver_socket)] = {"bind": INSIDE_DRIVER_SOCKET, "mode": "rw"}
    if spec.agent_home:
        volumes[str(spec.agent_home)] = {"bind": INSIDE_HOME, "mode": "rw"}
    if spec.command_log:
        volumes[str(spec.command_log)] = {"bind": INSIDE_COMMAND_LOG, "mode": "rw"}
    for inside, host in sorted(spec.extra_ro.items()):
        volumes[str(host)] = {"bind": inside, "mode": "ro"}
    kwargs = {
        "image": image,
        "command": list(spec.command),
        "detach": True,
        "working_dir": INSIDE_WORKSPACE,
        "environment": container_env(spec),
        "volumes": volumes,
        "network_mode": spec.network or "none",
        "labels": {"a2c.sandbox": spec.marker},
        "init": True,               # reaps zombies, forwards signals to the whole tree
        "read_only": True,          # root filesystem read-only: only the mounts are writable
        "tmpfs": {"/tmp": "rw,exec,size=8g"},
        "security_opt": ["no-new-privileges"],
        "cap_drop": ["ALL"],
        "user": f"{ids.uid}:{ids.gid}",
        "group_add": [],
        "pids_limit": 4096,
        "stop_signal": "SIGTERM",
    }
    if spec.mem_limit:
        kwargs["mem_limit"] = spec.mem_limit
    if spec.cpus:
        kwargs["nano_cpus"] = int(spec.cpus * 1e9)
    if spec.gpus:
        import docker.types
        count = -1 if spec.gpus < 0 else int(spec.gpus)
        kwargs["device_requests"] = [docker.types.DeviceRequest(count=count,
                                                                capabilities=[["gpu"]])]
    return kwargs


def image_tag(spec: SandboxSpec) -> str:
    """`a2c-<task>:<bundle digest>`: one image per task bundle, reused by every run of it.

    The image is built from the task bundle alone (its Dockerfile, hooks and workspace; the agent's
    files are mounted at /run/a2c/agent, never baked in), and the bundle's digest covers every one
    of those files, so the digest names the image's content. An explicit `spec.image` wins; a
    folder without a manifest falls back to the run's marker (built each run, as before).
    """
    if spec.image:
        return spec.image
    return digest_tag(spec.bundle_root) or f"a2c-{(spec.marker or 'bundle')[:12]}:latest"


def digest_tag(bundle_root: Path | None) -> str | None:
    """The tag named by the bundle's manifest (id and digest), or None without a manifest."""
    manifest = _manifest(bundle_root)
    digest, task = manifest.get("digest"), manifest.get("id")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        return None
    name = re.sub(r"[^a-z0-9._-]+", "-", str(task or "bundle").lower()).strip("-._")
    return f"a2c-{name or 'bundle'}:{digest}"


def _manifest(bundle_root: Path | None) -> dict:
    if bundle_root is None:
        return {}
    try:
        manifest = json.loads((Path(bundle_root) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _client():
    try:
        import docker
        import requests
    except ImportError as exc:
        raise RunError("docker backend: the docker SDK is not installed "
                       "(pip install 'a2c[docker]')") from exc
    try:
        client = docker.from_env()
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        raise RunError(NO_ENGINE.format(detail=str(exc).splitlines()[0][:160])) from exc


class DockerProcess:
    def __init__(self, container, log_path: Path):
        self.container = container
        self.pid = None
        self._rc: int | None = None
        self._log_path = log_path
        self._pump = threading.Thread(target=self._copy_logs, daemon=True)
        self._pump.start()

    def _copy_logs(self) -> None:
        with open(self._log_path, "ab", buffering=0) as handle:
            for chunk in self.container.logs(stream=True, follow=True):
                handle.write(chunk)

    @property
    def returncode(self) -> int | None:
        return self._rc

    def poll(self) -> int | None:
        if self._rc is None:
            self.container.reload()
            if self.container.status in ("exited", "dead"):
                self._rc = int(self.container.attrs["State"]["ExitCode"])
        return self._rc

    def wait(self, timeout: float | None = None) -> int | None:
        import requests
        try:
            result = self.container.wait(timeout=timeout)
            self._rc = int(result.get("StatusCode", -1))
        except requests.exceptions.ReadTimeout:
            return None
        return self._rc

    def stop(self, grace: float = 3.0) -> dict:
        self.container.stop(timeout=max(1, int(grace)))  # SIGTERM to the tree (init), then SIGKILL
        self.wait(timeout=10)
        return {"terminated": 1, "killed": 0, "survivors": []}


class DockerBackend:
    name = "docker"
    isolation = "docker"

    def __init__(self, build: bool = True):
        self.build = build
        self.client = _client()

    def warning(self) -> str | None:
        return None

    def build_image(self, spec: SandboxSpec) -> str:
        """Build the bundle's image, or reuse the one already tagged with its digest."""
        tag = image_tag(spec)
        if spec.bundle_root is None:
            raise RunError("docker backend: no bundle to build the image from")
        if tag == digest_tag(spec.bundle_root) and self._has_image(tag):
            return tag  # built before from this very bundle content
        try:
            self.client.images.build(path=str(spec.bundle_root), tag=tag, rm=True)
        except Exception as exc:
            raise RunError(f"docker backend: building {tag} failed: {exc}") from exc
        return tag

    def _has_image(self, tag: str) -> bool:
        try:
            self.client.images.get(tag)
        except Exception:  # docker.errors.ImageNotFound, or an engine error: build as usual
            return False
        return True

    def start(self, spec: SandboxSpec) -> DockerProcess:
        tag = self.build_image(spec) if self.build else image_tag(spec)
        ids = agent_ids()
        if is_root():   # what the agent writes, as for the local backend
            if spec.command_log:
                spec.command_log.touch(exist_ok=True)
            grant_agent(ids, **grants(spec))
        try:
            container = self.client.containers.run(**container_kwargs(spec, tag, ids))
        except Exception as exc:
            raise RunError(f"docker backend: could not start the container: {exc}") from exc
        return DockerProcess(container, spec.log_path)
