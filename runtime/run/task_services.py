"""The task's declared services (`environment.services`, e.g. the WebShop server) for one run:
started before any grading, each reached by the agent only through a proxy limited to its
training split (runtime/env_services/proxy.py), stopped when the run ends."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.bundle import read_manifest
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.spec import TaskSpec
from a2c.runtime.run.context import Reporter


class TaskServices:
    def __init__(self, run_dir: Path, report: Reporter):
        self.paths = RunPaths(run_dir)
        self.report = report
        self.services = None        # runtime/env_services' handle, while they run
        self.proxies: dict = {}     # name -> the agent's proxy to it

    def start(self) -> None:
        paths = self.paths
        task = TaskSpec.from_dict(read_manifest(paths.bundle, "Task").get("task") or {})
        specs = task.environment.services
        if not specs or self.services is not None:
            return
        from a2c.runtime.env_services import agent_proxies, describe, start_env_services
        self.report("starting services: " + ", ".join(describe(s) for s in specs))
        self.services = start_env_services(specs, log_dir=paths.logs)
        self.proxies = agent_proxies(task, paths.train, paths.env_service_sockets,
                                     log_dir=paths.logs)
        for name in self.proxies:
            self.report(f"service {name}: the agent reaches it through a proxy limited "
                        "to its training split")

    def stop(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies = {}
        if self.services is not None:
            self.services.stop()
            self.services = None
