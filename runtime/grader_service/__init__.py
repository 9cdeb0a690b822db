"""The grading service: its own process, a journal, a queue, a child process per evaluation.

The runtime's API:

    from a2c.runtime.grader_service import write_service_config, start_service, compute_baseline_for_run
    write_service_config(run_dir, token=..., socket_path=..., port=0, output_dir=..., ...)
    baseline = compute_baseline_for_run(run_dir)        # or compute_baseline(...) directly
    handle = start_service(run_dir)                     # returns once RUN_DIR/grader/ready exists
    handle.client().list(); handle.wait_idle(600)
    handle.stop()                                       # SIGTERM: the running evaluation finishes

See docs/grader-service.md for the HTTP API, the journal format and resume semantics.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from a2c.errors import RunError
from a2c.runtime.grader_service.baseline import (
    compute_baseline,
    compute_baseline_for_run,
    model_fingerprint,
)
from a2c.runtime.grader_service.client import ServiceClient, ServiceError

__all__ = [
    "ServiceClient",
    "ServiceError",
    "ServiceHandle",
    "compute_baseline",
    "compute_baseline_for_run",
    "model_fingerprint",
    "read_journal",
    "start_service",
    "write_service_config",
]


def write_service_config(run_dir: str | Path, **fields: Any) -> Path:
    """Write RUN_DIR/grader/service.json (0600: it holds the token). Keys: see contracts."""
    grader = Path(run_dir) / "grader"
    grader.mkdir(parents=True, exist_ok=True)
    path = grader / "service.json"
    clean = {k: (str(v) if isinstance(v, Path) else v) for k, v in fields.items()}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(clean, handle, indent=1, sort_keys=True)
    return path


def read_journal(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "submissions.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


class ServiceHandle:
    def __init__(self, run_dir: Path, proc: subprocess.Popen, ready: dict[str, Any], token: str):
        self.run_dir, self.proc, self.ready, self.token = run_dir, proc, ready, token

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        """TCP URL when the service listens on TCP, else the `unix:` URL."""
        return self.ready.get("url") or self.ready["unix_url"]

    @property
    def unix_url(self) -> str | None:
        return self.ready.get("unix_url")

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
            except (OSError, ServiceError):
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
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self) -> None:
        """SIGKILL the service (its evaluation child dies with it)."""
        if self.proc.poll() is None:
            self.proc.kill()


def start_service(run_dir: str | Path, *, timeout_s: float = 60.0,
                  log_path: str | Path | None = None,
                  python: str | None = None, env: dict[str, str] | None = None) -> ServiceHandle:
    """Start `python -m a2c.runtime.grader_service RUN_DIR` and wait for RUN_DIR/grader/ready.

    stdout/stderr go to `log_path` (default RUN_DIR/logs/grader.log). Raises RunError if the
    service exits or is not ready within `timeout_s`.
    """
    run_dir = Path(run_dir).resolve()
    cfg_path = run_dir / "grader" / "service.json"
    if not cfg_path.is_file():
        raise RunError(f"{cfg_path}: missing; write it with write_service_config first")
    token = json.loads(cfg_path.read_text(encoding="utf-8"))["token"]
    ready = run_dir / "grader" / "ready"
    try:
        ready.unlink()
    except FileNotFoundError:
        pass
    log_path = Path(log_path) if log_path else run_dir / "logs" / "grader.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([python or sys.executable, "-m", "a2c.runtime.grader_service",
                                 str(run_dir)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=env, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready.is_file():
            try:
                info = json.loads(ready.read_text(encoding="utf-8"))
                if info.get("pid") == proc.pid:
                    return ServiceHandle(run_dir, proc, info, token)
            except ValueError:
                pass
        if proc.poll() is not None:
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-1500:]
            raise RunError(f"the grading service exited with status {proc.returncode}:\n{tail}")
        time.sleep(0.05)
    proc.kill()
    raise RunError(f"the grading service was not ready within {timeout_s:g} s (see {log_path})")
