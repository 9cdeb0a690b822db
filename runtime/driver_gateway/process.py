"""Start, probe and stop a run's driver gateway (and, for `scripted:*`, its scripted driver).

    prepare_gateway(paths, driver, agent, budget)   # writes driver/gateway.json + gateway.key
    gw = DriverGatewayProcess(run_dir); gw.start()  # returns once driver/ready names its pid
    ok, message = probe(paths.driver_socket, key)   # GET /a2c/health with the run key
    ...
    gw.stop(); read_totals(run_dir)                 # driver/totals.json

Like the grader service, the gateway is its own process in its own session: an agent that
kills its process group cannot take it down, and a gateway crash cannot take the runtime down.
For a scripted driver the scripted driver server (a2c.runtime.scripted_driver) is started first
on 127.0.0.1:0; its port becomes the gateway's upstream, and it is stopped with the gateway.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.fsutil import read_tail, write_json_atomic

from .config import read_config
from .ledger import empty_totals

GATEWAY_MODULE = "a2c.runtime.driver_gateway"
SCRIPTED_MODULE = "a2c.runtime.scripted_driver"


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def probe(socket_path: str | Path, key: str, timeout: float = 5.0) -> tuple[bool, str]:
    """Ask the gateway's health endpoint with the run key: (True, "driver ... serving ...") or
    (False, why)."""
    conn = _UnixHTTPConnection(str(socket_path), timeout)
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
    config = read_config(run_dir)
    return {"A2C_DRIVER": config["driver"], "A2C_DRIVER_MODEL": config["model"],
            "A2C_DRIVER_WIRE": config.get("agent_wire") or "",
            "A2C_DRIVER_SOCKET": socket_in_sandbox or config["socket"],
            "A2C_DRIVER_KEY": read_key(run_dir)}


def read_totals(run_dir: str | Path) -> dict[str, Any]:
    """driver/totals.json (calls, input/output/cache tokens, cost_usd, errors, by_model, budget,
    exhausted); zeros when the gateway never ran."""
    paths = RunPaths(Path(run_dir))
    try:
        return json.loads(paths.driver_totals.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        try:
            return empty_totals(read_config(run_dir))
        except RunError:
            return empty_totals({})


def _wait_file(path: Path, proc: subprocess.Popen, deadline: float, what: str, log: Path,
               check=lambda text: bool(text.strip())) -> str:
    while time.monotonic() < deadline:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if check(text):
                return text
        if proc.poll() is not None:
            raise RunError(f"the {what} exited with status {proc.returncode}:\n"
                           f"{read_tail(log, 1500)}")
        time.sleep(0.02)
    proc.kill()
    raise RunError(f"the {what} was not ready within the time allowed (see {log})")


def _stop(proc: subprocess.Popen | None, grace: float) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class DriverGatewayProcess:
    """The run's driver gateway process (see the module doc)."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir).resolve()
        self.paths = RunPaths(self.run_dir)
        self.proc: subprocess.Popen | None = None
        self.scripted: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0, env: dict[str, str] | None = None,
              python: str | None = None) -> None:
        """Start the gateway (and a scripted driver) and wait until it serves; RunError if it
        exits or is not ready within `timeout` s. `env` defaults to this process's environment
        (the provider key variable must be in it)."""
        config = read_config(self.run_dir)
        python = python or sys.executable
        env = dict(os.environ if env is None else env)
        deadline = time.monotonic() + timeout
        log = self.paths.driver_log
        log.parent.mkdir(parents=True, exist_ok=True)
        if config.get("scripted"):
            self._start_scripted(config, python, env, deadline)
        try:
            self.paths.driver_ready.unlink()
        except FileNotFoundError:
            pass
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([python, "-m", GATEWAY_MODULE, str(self.run_dir)],
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         env=env, start_new_session=True)
        pid = str(self.proc.pid)
        try:
            _wait_file(self.paths.driver_ready, self.proc, deadline, "driver gateway", log,
                       check=lambda t: _json(t).get("pid") == int(pid))
        except RunError:
            _stop(self.scripted, 5)
            raise

    def _start_scripted(self, config: dict, python: str, env: dict, deadline: float) -> None:
        port_file = self.paths.driver / "scripted.port"
        try:
            port_file.unlink()
        except FileNotFoundError:
            pass
        log = self.paths.scripted_driver_log
        log.parent.mkdir(parents=True, exist_ok=True)
        # The scripted driver gets no provider key: it needs none.
        child_env = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}
        with open(self.paths.logs / "scripted-driver.stderr.log", "ab") as err:
            self.scripted = subprocess.Popen(
                [python, "-m", SCRIPTED_MODULE, "--script", config["scripted"]["script"],
                 "--port-file", str(port_file), "--log", str(log),
                 "--model", config["model"]],
                stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=child_env,
                start_new_session=True)
        (self.paths.driver / "scripted.pid").write_text(str(self.scripted.pid))
        text = _wait_file(port_file, self.scripted, deadline, "scripted driver",
                          self.paths.logs / "scripted-driver.stderr.log",
                          check=lambda t: t.strip().isdigit())
        config["upstream"]["base_url"] = f"http://127.0.0.1:{int(text.strip())}"
        write_json_atomic(self.paths.driver_config, config, mode=0o600)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM: the gateway finishes writing its record, then exits; the scripted driver
        follows. SIGKILL after `grace` s."""
        _stop(self.proc, grace)
        _stop(self.scripted, grace)


def _json(text: str) -> dict:
    try:
        out = json.loads(text)
        return out if isinstance(out, dict) else {}
    except ValueError:
        return {}


def stop_stale(run_dir: str | Path) -> None:
    """After a crash of the runtime: stop a gateway (and scripted driver) left over from before
    on this run, each checked by its command line so a recycled pid is left alone."""
    paths = RunPaths(Path(run_dir).resolve())
    for pid_file, module in ((paths.driver_pid, GATEWAY_MODULE),
                             (paths.driver / "scripted.pid", SCRIPTED_MODULE)):
        try:
            pid = int(pid_file.read_text())
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        marker = str(paths.root).encode()
        if module.encode() in cmd and any(marker in part for part in cmd):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
