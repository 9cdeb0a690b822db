"""`RUN_DIR/run.json`: what a run is and where it stands (docs/contracts.md, "Run directory").

The runtime writes it (prepare, then after every change of state); the analysis reads it. One
class, `RunInfo`, with one writer (`write_run_info` / `RunInfo.write`, atomic, indented, sorted
keys) and one reader (`read_run_info` / `RunInfo.read`). `format` names the version of this
record; a reader keeps keys it does not know in `extra` and writes them back unchanged.

A plain typed record: the runtime reads and sets its attributes (`info.status = ...`); the
run's limits are one typed `Budget` (a2c.contracts.budget), its settings a `RunSettings`. A field written only once the run
reaches its step is `UNSET` until then and left out of the JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from a2c.fsutil import write_json_atomic

from .budget import Budget
from .driver_server import DriverServerRecord
from .parts import Part
from .records import OMIT_NONE, Record, optional
from .spec import ScoringSpec

RUN_JSON = "run.json"              # relative to the run directory
RUN_INFO_FORMAT = "a2c-run/1"


class _Unset:
    """A key that is not in run.json yet (it appears once the run reaches that step)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class RunStatus(str, Enum):
    """Where a run stands (`run.json`'s `status`); a `str`, so the JSON holds the plain value."""

    PREPARED = "prepared"            # prepared, the agent not started yet
    RUNNING = "running"              # started (or resumed); a dead process leaves it so
    FINISHED = "finished"            # ended with at least one submission
    AGENT_FAILED = "agent_failed"    # the agent exited non-zero on its own
    NO_SUBMISSION = "no_submission"  # ended without one submission
    FAILED = "failed"                # the runtime failed (pre-flight, an error)
    INTERRUPTED = "interrupted"      # stopped by the operator (Ctrl-C)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def of(cls, value: Any) -> RunStatus | Any:
        """The member named by `value`; a value that is none (an unknown string, None) as is."""
        try:
            return cls(value)
        except ValueError:
            return value


# The statuses of a run that reached its end (resume refuses them, a sweep skips them): the agent
# ran and the run is scored.
ENDED: tuple[RunStatus, ...] = (RunStatus.FINISHED, RunStatus.AGENT_FAILED,
                                RunStatus.NO_SUBMISSION)


@dataclass(frozen=True)
class AgentExit:
    """How the agent's process ended (run.json `agent_exit`): `reason` exited | deadline |
    disk_budget | no budget left at resume; `cause` why, where the code does not say (memory,
    processes, disk, a signal, the wall clock)."""

    returncode: int | None = None
    reason: str = "exited"
    cause: str | None = None

    @property
    def failed_on_its_own(self) -> bool:
        """It exited non-zero without the runtime stopping it."""
        return self.reason == "exited" and self.returncode not in (None, 0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"returncode": self.returncode, "reason": self.reason}
        if self.cause:
            out["cause"] = self.cause
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentExit:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class BaseModelRecord(Part):
    """The model the run started from (run.json `base_model`): the task's `base_model` as the
    run resolved it (or `--model`'s), where it is (relative to the home folder when it is in
    it) and the digest of its weights. Each key is written once the run knows it (a record
    made before that is `{}`)."""

    spec: dict[str, Any] | None = optional()
    path: str | None = optional()
    fingerprint: str | None = optional()


@dataclass(frozen=True)
class DataRecord(Part):
    """The splits the run holds (run.json `data`): each one's fingerprint and record count; with
    a final split (scoring.final) the held-out split is its feedback part and the final part is
    counted apart. Each key is written once the run knows it (a record made before that is
    `{}`)."""

    agent_fingerprint: str | None = optional()
    agent_records: int | None = optional()
    heldout_fingerprint: str | None = optional()
    heldout_records: int | None = optional()
    final_fingerprint: str | None = optional()
    final_records: int | None = optional()


@dataclass(frozen=True)
class GpuPlacement(Part):
    """The devices a run holds (run.json `gpus`, host indices): the agent's, the grader's, and
    a served driver's (`--driver vllm/MODEL`; absent for any other driver). runtime/run/devices.py
    assigns them; a sweep's resume replaces them with its new placement."""

    agent: tuple[str, ...] = ()
    grader: tuple[str, ...] = ()
    driver: tuple[str, ...] | None = optional()

    @property
    def any(self) -> bool:
        """Whether the run holds any device."""
        return bool(self.agent or self.grader or self.driver)


@dataclass
class RunSettings(Record):
    """How the runtime runs this run (run.json `options`): the operator's choices and the pace
    of the supervision loop (a test's or a debugging session's; unset: the runtime's own)."""

    use_bwrap: bool | None = None               # local backend: None = where available
    snapshot_every_s: float | None = None       # None: runtime/run/context.py's default
    # None: a record from before agent params (its knobs were agent_env variables)
    agent_params: dict[str, Any] | None = None
    agent_env: dict[str, str] = field(default_factory=dict)
    meta_every_s: float | None = optional()     # run_meta.json in the workspace
    heartbeat_every_s: float | None = optional()
    process_interval_s: float | None = optional()   # the process recorder's sampling


@dataclass
class RunInfo:
    run_id: str
    task: str
    agent: str
    level: int | None = None
    title: str | None = None
    agent_digest: str | None = None
    driver: str | None = None
    mode: str = "free"
    seed: int = 0
    backend: str = "local"                      # the sandbox backend: local | docker
    base_model: BaseModelRecord = field(default_factory=BaseModelRecord)
    data: DataRecord = field(default_factory=DataRecord)
    bundle_digest: str | None = None
    spec_hash: str | None = None
    isolation: str | None = None                                # bubblewrap | docker | none
    budget: Budget = field(default_factory=Budget)
    scoring: dict[str, Any] = field(default_factory=lambda: {"policy": "best"})
    baseline_score: float | None = None
    best_score: float | None = None
    final_score: float | None = None
    submissions: int = 0
    valid_submissions: int = 0
    status: RunStatus = RunStatus.PREPARED
    started_at: str | None = None
    ended_at: str | None = None
    deadline: float | None = None     # unix seconds, fixed when the agent first starts
    agent_started_at: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    sandbox_id: str | None = None
    options: RunSettings = field(default_factory=RunSettings)
    agent_exit: AgentExit | None = None
    resumes: int = 0
    format: str = RUN_INFO_FORMAT
    # written once the run reaches the step that knows them: None (left out of the JSON) or,
    # where None is a value the step writes, UNSET until then
    best_submission: Any = UNSET      # str | None, after the first refresh of scores
    copies_of_base: int | None = optional()
    task_format: dict[str, Any] | None = optional()   # when the agent's deadline is fixed
    transcript: Any = UNSET           # str | None, at the end
    driver_usage: dict[str, Any] | None = optional()  # the gateway's totals (calls, tokens, cost)
    agent_log_tail: list[str] | None = optional()     # the agent log's last lines, on failure
    # the local backend's resource limits as its cgroup holds them, when the agent starts:
    # {memory|cpus|pids: {asked, enforced, why}, cgroup: v1|v2|none} (runtime/sandbox/cgroups.py)
    limits: dict[str, Any] | None = optional()
    # with a final split (scoring.final), at the end: the counted submission's and the base
    # model's score on the final items, and the selection gap (gain on feedback - gain on final)
    final_split_score: Any = UNSET    # float | None
    final_split_baseline: Any = UNSET  # float | None
    selection_gap: Any = UNSET        # float | None
    # the devices the run holds, once they are assigned
    gpus: GpuPlacement | None = optional()
    # a driver a2c serves itself (`--driver vllm/MODEL`), once its server is up: the weights'
    # digest, the server's version and flags, the served context, the sampling in force
    # (runtime/run/driver.py, DriverGateway.server_record)
    driver_server: DriverServerRecord | None = optional()
    extra: dict[str, Any] = field(default_factory=dict)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "status":
            value = RunStatus.of(value)
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ typed views
    @property
    def scoring_spec(self) -> ScoringSpec:
        """`scoring` (the task's policy), typed."""
        return ScoringSpec.from_dict(self.scoring or {})

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if isinstance(value, RunStatus):
                value = value.value
            elif isinstance(value, (Budget, RunSettings, AgentExit, Part)):
                value = value.to_dict()
            if value is not UNSET and not (value is None and f.metadata.get(OMIT_NONE)):
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names}
        known.setdefault("format", RUN_INFO_FORMAT)
        known["budget"] = Budget.from_dict(known.get("budget") or {})
        known["options"] = RunSettings.from_dict(known.get("options") or {})
        if isinstance(known.get("agent_exit"), dict):
            known["agent_exit"] = AgentExit.from_dict(known["agent_exit"])
        if isinstance(known.get("base_model"), dict):
            known["base_model"] = BaseModelRecord.from_dict(known["base_model"])
        if isinstance(known.get("data"), dict):
            known["data"] = DataRecord.from_dict(known["data"])
        if isinstance(known.get("gpus"), dict):
            known["gpus"] = GpuPlacement.from_dict(known["gpus"])
        if isinstance(known.get("driver_server"), dict):
            known["driver_server"] = DriverServerRecord.from_dict(known["driver_server"])
        return cls(**known, extra=extra)

    @classmethod
    def read(cls, path: str | Path) -> RunInfo:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def write(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict(), mode=0o600)


def read_run_info(run_dir: str | Path) -> RunInfo:
    return RunInfo.read(Path(run_dir) / RUN_JSON)


def read_run_mapping(run_dir_or_path: str | Path) -> dict[str, Any]:
    """run.json as written, a plain mapping, for readers that must take a partial or foreign
    record as it is (the analysis of someone else's run, a sweep's look at a half-made one);
    `run_dir_or_path` is the run directory or the file. OSError/ValueError when it is missing
    or not a JSON object."""
    path = Path(run_dir_or_path)
    if path.is_dir():
        path = path / RUN_JSON
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def write_run_info(run_dir: str | Path, info: RunInfo) -> Path:
    return info.write(Path(run_dir) / RUN_JSON)
