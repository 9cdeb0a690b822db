"""The sandbox interface: what a backend is given (`SandboxSpec`), what it returns, and the
backends by name.

One small interface, chosen by name (`get_backend("local" | "docker")`):

    backend.isolation            # "bubblewrap" | "none" | "docker" (recorded in run.json)
    backend.start(spec) -> SandboxProcess
    process.poll() / wait(timeout) / stop(grace) / returncode

A `SandboxSpec` names host paths (workspace, data, model, grader socket, logs); each backend
decides how the agent sees them (`inside` paths) and fills the path variables of the agent's
environment (`A2C_WORKSPACE`, `A2C_OUTPUT_DIR`, `A2C_DATA_DIR`, `A2C_BASE_MODEL`,
`A2C_GRADER_URL`, `A2C_COMMAND_LOG`; for a scaffold with a driver gateway `A2C_DRIVER_SOCKET`,
and `HOME` = `A2C_AGENT_HOME` when it has an agent home). Everything else in the environment comes from the runtime.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from a2c.errors import RunError


@dataclass
class SandboxSpec:
    command: list[str]                  # argv; paths in it are as the agent sees them
    workspace: Path                     # host path, the only writable place
    data_dir: Path                      # agent split, read-only
    model_dir: Path                     # base model, read-only
    socket_path: Path                   # grader's Unix socket (host path)
    log_path: Path                      # agent stdout+stderr
    command_log: Path                   # the bash hook appends every command here
    env: dict[str, str] = field(default_factory=dict)   # A2C_* (non-path) variables
    marker: str = ""                    # unique per run: finds escaped processes
    extra_ro: dict[str, Path] = field(default_factory=dict)  # inside path -> host path (agent files, hooks)
    env_service_sockets: Path | None = None   # environment service proxies' sockets, /run/a2c/env
    driver_socket: Path | None = None   # the driver gateway's socket, at /run/a2c/driver.sock
    agent_home: Path | None = None      # the scaffold's HOME (rw), at /run/a2c/home
    agent_tmp: Path | None = None       # the agent's /tmp (rw, RUN/agent-tmp); None: a tmpfs
    gpu_ids: tuple[str, ...] = ()       # host GPU indices the agent gets ("1",): both backends
    # what the agent may write, all its places together (`51200m`; disk.py): both backends
    disk_limit: str | None = None
    # docker only
    bundle_root: Path | None = None     # build context (the bundle's Dockerfile)
    image: str | None = None
    mem_limit: str | None = None
    cpus: float | None = None
    pids: int | None = None             # processes and threads (docker's pids limit)
    network: str = "none"               # "none" | "bridge" | "host"


class SandboxProcess(Protocol):
    pid: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int | None: ...
    def stop(self, grace: float = 3.0) -> dict: ...
    @property
    def returncode(self) -> int | None: ...


class SandboxBackend(Protocol):
    name: str
    isolation: str

    def start(self, spec: SandboxSpec) -> SandboxProcess: ...


# name -> "module:class"; imported only when chosen (docker's SDK is an optional extra).
_BACKEND_CLASSES = {"local": "a2c.runtime.sandbox.local:LocalBackend",
                    "docker": "a2c.runtime.sandbox.docker:DockerBackend"}
BACKENDS = tuple(_BACKEND_CLASSES)


def get_backend(name: str, **options) -> SandboxBackend:
    if name not in _BACKEND_CLASSES:
        raise RunError(f"unknown sandbox backend {name!r} (choose {' or '.join(BACKENDS)})")
    module, _, cls = _BACKEND_CLASSES[name].partition(":")
    return getattr(importlib.import_module(module), cls)(**options)
