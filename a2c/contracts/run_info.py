"""`RUN_DIR/run.json`: what a run is and where it stands (docs/contracts.md, "Run directory").

The runtime writes it (prepare, then after every change of state); the analysis reads it. One
class, `RunInfo`, with one writer (`write_run_info` / `RunInfo.write`, atomic, indented, sorted
keys) and one reader (`read_run_info` / `RunInfo.read`). `format` names the version of this
record; a reader keeps keys it does not know in `extra` and writes them back unchanged.

The runtime also reads and updates fields by name (`info["status"] = "running"`,
`info.get("deadline")`), so the record works as a mapping over its fields as well.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from a2c.fsutil import write_json_atomic

RUN_JSON = "run.json"              # relative to the run directory
RUN_INFO_FORMAT = "a2c-run/1"


class _Unset:
    """A key that is not in run.json yet (it appears once the run reaches that step)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


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
    backend: str = "local"
    base_model: dict[str, Any] = field(default_factory=dict)   # {spec, path, fingerprint}
    data: dict[str, Any] = field(default_factory=dict)          # fingerprints and record counts
    bundle_digest: str | None = None
    spec_hash: str | None = None
    isolation: str | None = None                                # bubblewrap | docker | none
    budget: dict[str, Any] = field(default_factory=dict)
    scoring: dict[str, Any] = field(default_factory=lambda: {"policy": "best"})
    baseline_score: float | None = None
    best_score: float | None = None
    final_score: float | None = None
    submissions: int = 0
    valid_submissions: int = 0
    # prepared | running | finished | agent_failed | no_submission | failed | interrupted
    status: str = "prepared"
    started_at: str | None = None
    ended_at: str | None = None
    deadline: float | None = None     # unix seconds, fixed when the agent first starts
    agent_started_at: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    sandbox_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    agent_exit: dict[str, Any] | None = None
    resumes: int = 0
    format: str = RUN_INFO_FORMAT
    # written once the run reaches the step that knows them
    best_submission: Any = UNSET      # str | None, after the first refresh of scores
    copies_of_base: Any = UNSET       # int
    task_format: Any = UNSET          # dict, when the agent's deadline is fixed
    transcript: Any = UNSET           # str | None, at the end
    driver_usage: Any = UNSET         # dict: the gateway's totals (calls, tokens, cost)
    agent_log_tail: Any = UNSET       # list[str]: the agent log's last lines, on failure
    # the local backend's resource limits as its cgroup holds them, when the agent starts:
    # {memory|cpus|pids: {asked, enforced, why}, cgroup: v1|v2|none} (runtime/sandbox/cgroups.py)
    limits: Any = UNSET               # dict
    # with a final split (scoring.final), at the end: the counted submission's and the base
    # model's score on the final items, and the selection gap (gain on feedback - gain on final)
    final_split_score: Any = UNSET    # float | None
    final_split_baseline: Any = UNSET  # float | None
    selection_gap: Any = UNSET        # float | None
    extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        for f in fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is not UNSET:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        names = {f.name for f in fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names}
        known.setdefault("format", data.get("format", RUN_INFO_FORMAT))
        return cls(**known, extra=extra)

    @classmethod
    def read(cls, path: str | Path) -> RunInfo:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def write(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict(), mode=0o600)

    # ------------------------------------------------------------------ mapping access
    def _check(self, key: str) -> None:
        if key == "extra" or key not in self.__dataclass_fields__:
            raise KeyError(key)

    def __getitem__(self, key: str) -> Any:
        if key in self.extra:
            return self.extra[key]
        self._check(key)
        value = getattr(self, key)
        if value is UNSET:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self.__dataclass_fields__ and key != "extra":
            setattr(self, key, value)
        else:
            self.extra[key] = value

    def __contains__(self, key: object) -> bool:
        try:
            self[str(key)]
        except KeyError:
            return False
        return True

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def update(self, values: dict[str, Any] | None = None, **more: Any) -> None:
        for key, value in {**(values or {}), **more}.items():
            self[key] = value


def read_run_info(run_dir: str | Path) -> RunInfo:
    return RunInfo.read(Path(run_dir) / RUN_JSON)


def write_run_info(run_dir: str | Path, info: RunInfo) -> Path:
    return info.write(Path(run_dir) / RUN_JSON)
