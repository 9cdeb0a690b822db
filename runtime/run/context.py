"""What one run is given (`RunOptions`) and what it carries between steps (`RunContext`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.events import EventLog
from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths
from a2c.settings import get as setting

SNAPSHOT_EVERY_S = 180.0   # the default; this host's $A2C_SNAPSHOT_EVERY_S is read per run
STOP_GRACE_S = 3.0
READY_TIMEOUT_S = 120.0
Reporter = Callable[[str], None]


def default_snapshot_every_s() -> float:
    """Seconds between snapshots when the run does not say: $A2C_SNAPSHOT_EVERY_S, else 180."""
    return float(setting("A2C_SNAPSHOT_EVERY_S"))


@dataclass
class RunOptions:
    bundle: str                      # bundle folder or task id with a bundle in generated/
    agent: str                       # agent bundle folder or agent id (generated/agents/)
    model: str | None = None         # override of the task's base model: folder, builtin name, hub id
    budget: str | float | None = None
    mode: str = "free"
    backend: str = "local"
    seed: int = 0
    runs_dir: str | Path | None = None
    driver: str | None = None        # driver model for LLM scaffolds
    # overrides of the task's driver budget (a scaffold's gateway): None keeps the task's
    driver_tokens: int | None = None
    driver_cost: float | None = None     # USD
    driver_calls: int | None = None
    # the agent's params (its spec's `params:`), as given: typed values or CLI strings; the run
    # records and hands over the effective ones (a2c.contracts.agent_params)
    agent_params: dict[str, Any] = field(default_factory=dict)
    # extra variables for the agent's sandbox (tests' probes; not for an agent's settings)
    agent_env: dict[str, str] = field(default_factory=dict)
    use_bwrap: bool | None = None    # local backend: None = where available
    # GPUs (runtime/run/devices.py): host indices "0,1" or "none"; None = the task's budget.gpus
    gpus: str | None = None
    grader_gpus: str | None = None   # the grader's own; None = one free device not the agent's
    # a vllm/ driver's server: its own devices; None = one free device neither the agent's nor
    # the grader's where the machine has GPUs, else none (a CPU build of vLLM)
    driver_gpus: str | None = None
    # a vllm/ driver's server shared by the runs given the same folder on one node (a sweep's
    # trials): runtime/run/driver_share.py; None = the run's own server
    share_driver_server: str | Path | None = None
    snapshot_every_s: float = field(default_factory=default_snapshot_every_s)
    run_id: str | None = None


@dataclass
class RunContext:
    run_dir: Path
    run: RunInfo

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        if isinstance(self.run, dict):
            self.run = RunInfo.from_dict(self.run)

    @classmethod
    def load(cls, run_dir: str | Path) -> RunContext:
        run_dir = Path(run_dir)
        return cls(run_dir, RunInfo.read(RunPaths(run_dir).run_json))

    @property
    def paths(self) -> RunPaths:
        return RunPaths(self.run_dir)

    @property
    def events(self) -> EventLog:
        return EventLog(self.paths.events, verify=False)

    def save(self) -> None:
        self.run.write(self.paths.run_json)


def versions() -> dict[str, str | None]:
    from importlib import metadata

    import a2c
    out: dict[str, str | None] = {"a2c": a2c.__version__, "python": sys.version.split()[0]}
    for name in ("torch", "transformers", "trl"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def read_json(path: Path) -> Any:
    import json
    return json.loads(Path(path).read_text(encoding="utf-8"))
