"""Start the grader service for a run and hold its process (`ServiceHandle`).

    handle = start_grader_service(run_dir)    # returns once RUN_DIR/grader/ready names its pid
    handle.client().list(); handle.wait_idle(600)
    handle.stop()                             # SIGTERM: the running evaluation finishes

The process is a `runtime/hostproc.py` helper (its own session, the ready file naming its pid).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import ServiceConfig
from a2c.errors import RunError
from a2c.runtime.grader_service.client import GraderClientError, ServiceClient
from a2c.runtime.grader_service.common import ReadyInfo
from a2c.runtime.hostproc import HostProcess, pid_file_ready, unlink_quiet

SERVICE_MODULE = "a2c.runtime.grader_service"   # `python -m SERVICE_MODULE RUN_DIR`


class ServiceHandle:
    def __init__(self, run_dir: Path, helper: HostProcess, ready: ReadyInfo, token: str):
        self.run_dir, self.helper, self.ready, self.token = run_dir, helper, ready, token

    @property
    def proc(self) -> subprocess.Popen:
        return self.helper.proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        """TCP URL when the service listens on TCP, else the `unix:` URL."""
        return str(self.ready.url or self.ready.unix_url)

    @property
    def unix_url(self) -> str | None:
        return self.ready.unix_url

    def client(self, url: str | None = None, timeout: float = 30.0) -> ServiceClient:
        return ServiceClient(url or self.url, self.token, timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_idle(self, timeout: float | None = None, poll: float = 0.2) -> bool:
        """Wait until no submission is queued or running; False on timeout or a dead service."""
        deadline = None if timeout is None else time.monotonic() + timeout
        client = self.client()
        while deadline is None or time.monotonic() < deadline:
            if not self.alive():
                return False
            try:
                subs = client.list()["submissions"]
            except (OSError, GraderClientError):
                subs = None
            if subs is not None and all(s["status"] in ("scored", "invalid") for s in subs):
                return True
            time.sleep(poll)
        return False

    def stop(self, timeout: float | None = None, drain: bool = False) -> int | None:
        """SIGTERM (the running evaluation finishes; queued ones stay in the journal for a resume).
        `drain=True` first waits for the queue to empty. After `timeout` s: SIGKILL."""
        if drain:
            self.wait_idle(timeout)
        # The service alone: it ends its evaluation child itself (its own session).
        return self.helper.stop(timeout, group=False)

    def kill(self) -> None:
        """SIGKILL the service (its evaluation child dies with it)."""
        if self.proc.poll() is None:
            self.proc.kill()


def start_grader_service(run_dir: str | Path, *, timeout_s: float = 60.0,
                  log_path: str | Path | None = None,
                  python: str | None = None, env: dict[str, str] | None = None) -> ServiceHandle:
    """Start `python -m a2c.runtime.grader_service RUN_DIR` and wait for RUN_DIR/grader/ready.

    stdout/stderr go to `log_path` (default RUN_DIR/logs/grader.log). Raises RunError if the
    service exits or is not ready within `timeout_s`.
    """
    run_dir = Path(run_dir).resolve()
    paths = RunPaths(run_dir)
    if not paths.service_json.is_file():
        raise RunError(f"{paths.service_json}: missing; write it with write_service_config first")
    token = ServiceConfig.load(run_dir).token
    unlink_quiet(paths.ready)
    helper = HostProcess.spawn([python or sys.executable, "-m", SERVICE_MODULE, str(run_dir)],
                               what="grader service", log=log_path or paths.grader_log, env=env)
    info = helper.wait_ready(pid_file_ready(paths.ready, helper.pid), timeout_s, poll=0.05)
    return ServiceHandle(run_dir, helper, ReadyInfo.from_dict(info), token)
