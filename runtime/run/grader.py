"""The run's grader service process: start (and restart on the same journal), stop, and, after a
crash of the runtime, find and stop the one left over from before."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import read_service_fields
from a2c.runtime.run.context import READY_TIMEOUT_S
from a2c.unixhttp import remove_stale

SERVICE_MODULE = "a2c.runtime.grader_service"


class GraderProcess:
    """The grader service for this run (`a2c.runtime.grader_service.start_grader_service`)."""

    def __init__(self, run_dir: Path, run: RunInfo | None = None):
        self.run_dir = run_dir
        self.paths = RunPaths(run_dir)
        self.handle = None
        self.run = run

    def env(self) -> dict[str, str] | None:
        """The service's environment: CUDA_VISIBLE_DEVICES names the grader's own GPUs."""
        from a2c.runtime.run.devices import grader_env
        return grader_env(self.run) if self.run is not None else None

    def start(self, timeout: float = READY_TIMEOUT_S) -> None:
        from a2c.runtime.grader_service import start_grader_service
        sock = read_service_fields(self.run_dir).get("socket_path")
        if sock:
            remove_stale(sock)
        self.handle = start_grader_service(self.run_dir, timeout_s=timeout,
                                           log_path=self.paths.grader_log, env=self.env())
        self.handle.helper.write_pid(self.paths.service_pid)

    def alive(self) -> bool:
        return self.handle is not None and self.handle.alive()

    def stop(self, grace: float = 30.0) -> None:
        if self.handle is not None and self.handle.alive():
            self.handle.stop(timeout=grace)


def kill_stale(run_dir: Path, run: RunInfo) -> None:
    """After a crash: stop a grader service, a driver gateway and agent processes left over."""
    from a2c.runtime.hostproc import stop_stale as stop_stale_helper
    from a2c.runtime.sandbox.proctree import kill_tree
    stop_stale_helper(RunPaths(run_dir).service_pid, [SERVICE_MODULE, str(run_dir)], grace=5.0)
    if RunPaths(run_dir).driver_pid.is_file():   # a scaffold's driver gateway, likewise
        from a2c.runtime.driver_gateway import stop_stale
        stop_stale(run_dir)
    if run.sandbox_id:
        kill_tree(None, None, run.sandbox_id, grace=2.0)
