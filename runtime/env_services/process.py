"""Environment services: the services a task declares (`environment.services`, e.g. WebShop's server).

The runtime starts them before any grading (the baseline included) and stops them after the run:

    group = start_env_services(task.environment.services, log_dir=RUN/"logs")
    ...
    group.stop()

or as a context manager (`with env_services_running(specs, log_dir=...) as group:`).

A service is the resolved spec's entry, `a2c.contracts.spec.ServiceSpec` (name, command, port,
health, startup_timeout_s), the one type for it. `command` is a
shell command line, run outside the agent's sandbox in its own process group (runtime/hostproc.py), with `{port}`
replaced by the port and `$A2C_SERVICE_PORT` set; `python` on its PATH is the interpreter running
a2c (the venv's bin folder comes first). Readiness: when `health` is a URL path, an HTTP GET of
`http://127.0.0.1:<port><health>` must answer 200; without one, a TCP connection to the port must
succeed. A service that exits before it is ready, or is not ready within `startup_timeout_s`,
raises `EnvServiceError` naming it, the reason and the tail of its log, and every service already
started by the same call is stopped. Stopping sends SIGTERM to the process group, then SIGKILL
after a grace period.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from a2c.contracts.spec import ServiceSpec
from a2c.errors import RunError
from a2c.fsutil import read_tail
from a2c.runtime.hostproc import HelperExited, HelperNotReady, HostProcess

POLL_S = 0.1


class EnvServiceError(RunError):
    """A declared service could not be started or did not become healthy."""


HOST = "127.0.0.1"   # a task's services listen on loopback, outside the agent's sandbox


def url_of(spec: ServiceSpec) -> str:
    return f"http://{HOST}:{spec.port}"


@dataclass
class RunningEnvService:
    spec: ServiceSpec
    helper: HostProcess
    started_at: float = field(default_factory=time.monotonic)

    @property
    def proc(self) -> subprocess.Popen:
        return self.helper.proc

    @property
    def log_path(self) -> Path | None:
        return self.helper.log

    @property
    def pid(self) -> int:
        return self.helper.pid

    def alive(self) -> bool:
        return self.helper.alive()

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM to its process group, SIGKILL after `grace` s."""
        return self.helper.stop(grace)


def probe(spec: ServiceSpec, timeout: float = 2.0) -> bool:
    """One readiness check: HTTP 200 on the health path, or a TCP connect without one."""
    if spec.health:
        try:
            with urllib.request.urlopen(url_of(spec) + spec.health, timeout=timeout) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False
    try:
        with socket.create_connection((HOST, spec.port), timeout=timeout):
            return True
    except OSError:
        return False


def _env_vars(spec: ServiceSpec, extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra or {})
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["A2C_SERVICE_PORT"] = str(spec.port)
    env["A2C_SERVICE_NAME"] = spec.name
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def start_env_service(spec: ServiceSpec, *, log_dir: str | Path | None = None,
                      cwd: str | Path | None = None,
                      env: dict[str, str] | None = None) -> RunningEnvService:
    """Start one service and wait until it is healthy; raise EnvServiceError otherwise."""
    if probe(spec, timeout=0.5):
        raise EnvServiceError(f"service {spec.name!r}: port {spec.port} is already in use "
                           f"(something answers at {url_of(spec)}); stop it or change the port")
    command = spec.command.replace("{port}", str(spec.port))
    log_path = Path(log_dir) / f"service-{spec.name}.log" if log_dir is not None else None
    try:
        helper = HostProcess.spawn(["/bin/sh", "-c", command], what=f"service {spec.name!r}",
                                   log=log_path, env=_env_vars(spec, env), cwd=cwd)
    except OSError as exc:
        raise EnvServiceError(f"service {spec.name!r}: cannot run {command!r}: {exc}") from None
    deadline = time.monotonic() + spec.startup_timeout_s
    url = url_of(spec)
    what = f"GET {url}{spec.health} -> 200" if spec.health else f"a connection to {url}"

    def tail() -> str:
        text = read_tail(log_path, 1500).strip()
        return f"\n--- log tail ({log_path}) ---\n{text}" if text else ""
    try:
        helper.wait_ready(lambda: probe(spec, timeout=min(2.0, max(0.1, deadline -
                                                                   time.monotonic()))),
                          deadline=deadline, poll=POLL_S, stop_grace=2.0)
    except HelperExited as exc:
        raise EnvServiceError(f"service {spec.name!r} exited with status {exc.returncode} "
                           f"before it was ready (command: {command})" + tail()) from None
    except HelperNotReady:
        raise EnvServiceError(f"service {spec.name!r} not healthy within "
                           f"{spec.startup_timeout_s:g}s (waited for {what}; command: {command})"
                           + tail()) from None
    return RunningEnvService(spec, helper)


class EnvServiceGroup:
    """The services of one run, started in order and stopped in reverse order."""

    def __init__(self, services: list[RunningEnvService] | None = None):
        self.services = list(services or [])

    def __iter__(self) -> Iterator[RunningEnvService]:
        return iter(self.services)

    def __len__(self) -> int:
        return len(self.services)

    def alive(self) -> dict[str, bool]:
        return {s.spec.name: s.alive() for s in self.services}

    def urls(self) -> dict[str, str]:
        return {s.spec.name: url_of(s.spec) for s in self.services}

    def stop(self, grace: float = 5.0) -> None:
        while self.services:
            self.services.pop().stop(grace=grace)

    def __enter__(self) -> EnvServiceGroup:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_env_services(specs: Iterable[ServiceSpec] | None, *,
                       log_dir: str | Path | None = None, cwd: str | Path | None = None,
                       env: dict[str, str] | None = None) -> EnvServiceGroup:
    """Start every declared service (in order); on any failure stop those started and raise."""
    group = EnvServiceGroup()
    try:
        for spec in specs or []:
            group.services.append(start_env_service(spec, log_dir=log_dir, cwd=cwd, env=env))
    except BaseException:
        group.stop(grace=2.0)
        raise
    return group


@contextmanager
def env_services_running(specs, **kwargs) -> Iterator[EnvServiceGroup]:
    group = start_env_services(specs, **kwargs)
    try:
        yield group
    finally:
        group.stop()


def describe(spec: ServiceSpec) -> str:
    return f"{spec.name} ({shlex.quote(spec.command)} on port {spec.port})"
