"""Start, probe and stop a run's driver gateway (and, for `scripted:*`, its scripted driver).

    prepare_gateway(paths, driver, agent, budget)   # writes driver/gateway.json + gateway.key
    gw = DriverGatewayProcess(run_dir); gw.start()  # returns once driver/ready names its pid
    ok, message = probe(paths.driver_socket, key)   # GET /a2c/health with the run key
    ...
    gw.stop(); read_totals(run_dir)                 # driver/totals.json

Like the grader service, the gateway is its own process in its own session (runtime/hostproc.py):
an agent that kills its process group cannot take it down, and a gateway crash cannot take the
runtime down.
For a scripted driver the scripted driver server (a2c.agents.scripted_driver) is started first
on 127.0.0.1:0; its port becomes the gateway's upstream, and it is stopped with the gateway.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.runtime import hostproc
from a2c.runtime.hostproc import HostProcess, file_ready, pid_file_ready, unlink_quiet
from a2c.unixhttp import UnixHTTPConnection

from .config import set_upstream_url
from .gateway_config import GatewayConfig
from .ledger import empty_totals

GATEWAY_MODULE = "a2c.runtime.driver_gateway"
SCRIPTED_MODULE = "a2c.agents.scripted_driver"


def probe(socket_path: str | Path, key: str, timeout: float = 5.0) -> tuple[bool, str]:
    """Ask the gateway's health endpoint with the run key: (True, "driver ... serving ...") or
    (False, why)."""
    conn = UnixHTTPConnection(str(socket_path), timeout)
    try:
        conn.request("GET", "/a2c/health", headers={"x-api-key": key})
        resp = conn.getresponse()
        data = resp.read()
    except OSError as exc:
        return False, f"the driver gateway at {socket_path} does not answer: {exc}"
    finally:
        conn.close()
    if resp.status != 200:
        return False, f"the driver gateway refused the health check ({resp.status})"
    info = json.loads(data)
    return True, (f"driver {info['driver']} (model {info['model']}) serving "
                  f"{', '.join(info['wires'])}")


def agent_env(run_dir: str | Path, socket_in_sandbox: str | None = None) -> dict[str, str]:
    """The variables the agent gets: A2C_DRIVER, A2C_DRIVER_MODEL, A2C_DRIVER_WIRE (the wire
    the run chose from those the agent speaks), A2C_DRIVER_SOCKET (the path the sandbox binds
    the socket at, else the host path), A2C_DRIVER_KEY (the per-run key)."""
    from .config import read_key
    config = GatewayConfig.read(run_dir)
    return {"A2C_DRIVER": config.driver, "A2C_DRIVER_MODEL": config.model,
            "A2C_DRIVER_WIRE": config.agent_wire or "",
            "A2C_DRIVER_SOCKET": socket_in_sandbox or config.socket or "",
            "A2C_DRIVER_KEY": read_key(run_dir)}


def read_totals(run_dir: str | Path) -> dict[str, Any]:
    """driver/totals.json (calls, input/output/cache tokens, cost_usd, errors, by_model, budget,
    exhausted); zeros when the gateway never ran."""
    paths = RunPaths(Path(run_dir))
    try:
        return json.loads(paths.driver_totals.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        try:
            return empty_totals(GatewayConfig.read(run_dir))
        except RunError:
            return empty_totals(None)


class DriverGatewayProcess:
    """The run's driver gateway process (see the module doc); `proc` and `scripted` are the
    processes (subprocess.Popen), None until started."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir).resolve()
        self.paths = RunPaths(self.run_dir)
        self.gateway: HostProcess | None = None
        self.scripted_driver: HostProcess | None = None

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.gateway.proc if self.gateway else None

    @property
    def scripted(self) -> subprocess.Popen | None:
        return self.scripted_driver.proc if self.scripted_driver else None

    def start(self, timeout: float = 30.0, env: dict[str, str] | None = None,
              python: str | None = None) -> None:
        """Start the gateway (and a scripted driver) and wait until it serves; RunError if it
        exits or is not ready within `timeout` s. `env` defaults to this process's environment
        (the provider key variable must be in it)."""
        config = GatewayConfig.read(self.run_dir)
        python = python or sys.executable
        env = dict(os.environ if env is None else env)
        deadline = time.monotonic() + timeout
        if config.script:
            self._start_scripted(config, python, env, deadline)
        unlink_quiet(self.paths.driver_ready)
        self.gateway = HostProcess.spawn([python, "-m", GATEWAY_MODULE, str(self.run_dir)],
                                         what="driver gateway", log=self.paths.driver_log,
                                         env=env)
        try:
            self.gateway.wait_ready(pid_file_ready(self.paths.driver_ready, self.gateway.pid),
                                    deadline=deadline)
        except RunError:
            if self.scripted_driver is not None:
                self.scripted_driver.stop(5)
            raise

    def _start_scripted(self, config: GatewayConfig, python: str, env: dict, deadline: float
                        ) -> None:
        port_file = self.paths.driver / "scripted.port"
        unlink_quiet(port_file)
        log = self.paths.scripted_driver_log
        log.parent.mkdir(parents=True, exist_ok=True)
        # The scripted driver gets no provider key: it needs none.
        child_env = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}
        self.scripted_driver = HostProcess.spawn(
            [python, "-m", SCRIPTED_MODULE, "--script", str(config.script),
             "--port-file", str(port_file), "--log", str(log), "--model", config.model],
            what="scripted driver", log=self.paths.logs / "scripted-driver.stderr.log",
            env=child_env)
        self.scripted_driver.write_pid(self.paths.driver / "scripted.pid")
        port = self.scripted_driver.wait_ready(
            file_ready(port_file, lambda t: int(t.strip()) if t.strip().isdigit() else None),
            deadline=deadline)
        set_upstream_url(self.run_dir, f"http://127.0.0.1:{port}")

    def alive(self) -> bool:
        return self.gateway is not None and self.gateway.alive()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM: the gateway finishes writing its record, then exits; the scripted driver
        follows. SIGKILL after `grace` s."""
        for helper in (self.gateway, self.scripted_driver):
            if helper is not None:
                helper.stop(grace)


def stop_stale(run_dir: str | Path) -> None:
    """After a crash of the runtime: stop a gateway (and scripted driver) left over from before
    on this run, each checked by its command line so a recycled pid is left alone."""
    paths = RunPaths(Path(run_dir).resolve())
    for pid_file, module in ((paths.driver_pid, GATEWAY_MODULE),
                             (paths.driver / "scripted.pid", SCRIPTED_MODULE)):
        hostproc.stop_stale(pid_file, [module, str(paths.root)])
