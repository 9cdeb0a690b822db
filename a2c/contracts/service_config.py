"""`RUN_DIR/grader/service.json`: what the grader service is told by the runtime that starts it.

One writer (`write_service_config`, used by the run's prepare and launch steps) and one reader
(`ServiceConfig.load`, used by the grader service). The file holds the run's token: it is written
atomically with mode 0600.

Keys (docs/contracts.md, "Grader service process"): token, socket_path, host, port,
deadline_unix, max_submissions, min_interval_s, eval_timeout_s, output_dir, agent_output_dir,
workspace, bundle, heldout, engine (the inference engine; `backend` in a file written by a2c
0.1.0), base_model, baseline_cache. Optional extensions:
`task_id` and `grader` (else read from the bundle), `evaluator` (the child command that scores one
model; defaults to `python -m a2c.runtime.grader_service.evaluate_one`), `snapshots` (false
disables code snapshots), `baseline` (true: the service scores the baseline first),
`max_submission_bytes` / `max_submission_files` (the grader's copy of one submission; 64 GiB and
10,000 by default), `max_connections` (per listener, 32) and `request_timeout_s` (10), `socket_gid`
(the group given the 0660 socket: the sandboxed agent's gid), `use_bwrap` (false when the run was
started with `--no-bwrap`: the evaluator's box and the code execution go without bubblewrap too;
written only then).

`grader/grader.json` (the grader section of a task, in a bundle and in a run directory) is read
here too, typed the moment it is parsed: `read_grader_spec`, `load_grader_config` and
`ServiceConfig.grader_config` give a `GraderSpec` (a2c.contracts.spec), which writes the same
JSON back (`to_dict`), so a cache key hashed over it does not move.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.spec import GraderSpec
from a2c.errors import RunError
from a2c.fsutil import write_bytes_atomic

SERVICE_JSON = "grader/service.json"   # relative to the run directory
GRADER_JSON = "grader/grader.json"     # relative to the run directory and to a task bundle
EVALUATOR_MODULE = "a2c.runtime.grader_service.evaluate_one"


def write_service_config(run_dir: str | Path, **fields: Any) -> Path:
    """Write RUN_DIR/grader/service.json (0600: it holds the token). Keys: see the module doc."""
    path = Path(run_dir) / SERVICE_JSON
    clean = {k: (str(v) if isinstance(v, Path) else v) for k, v in fields.items()}
    return write_bytes_atomic(path, json.dumps(clean, indent=1, sort_keys=True).encode(),
                              mode=0o600)


def read_service_fields(run_dir: str | Path) -> dict[str, Any]:
    """service.json as written (a plain dict), for the runtime's updates at launch."""
    return json.loads((Path(run_dir) / SERVICE_JSON).read_text(encoding="utf-8"))


def update_service_config(run_dir: str | Path, **updates: Any) -> Path:
    """Read service.json, apply `updates`, write it back through the one writer."""
    fields = read_service_fields(run_dir)
    fields.update(updates)
    return write_service_config(run_dir, **fields)


@dataclass
class ServiceConfig:
    run_dir: Path
    token: str
    output_dir: Path
    agent_output_dir: str
    workspace: Path | None = None
    socket_path: str | None = None
    host: str | None = "127.0.0.1"
    port: int | None = None
    deadline_unix: float | None = None
    max_submissions: int | None = None
    min_interval_s: float = 0.0
    eval_timeout_s: float = 3600.0
    bundle: Path | None = None
    heldout: Path | None = None
    engine: str = "auto"             # the grader's inference engine: auto | transformers | vllm
    base_model: Path | None = None
    baseline_cache: Path | None = None
    task_id: str | None = None
    grader: dict[str, Any] | None = None
    evaluator: list[str] | None = None
    snapshots: bool = True
    baseline: bool = False
    max_submission_bytes: int = 64 << 30    # the grader's copy of one submission, in total
    max_submission_files: int = 10_000      # files and folders in one submission
    max_connections: int = 32               # open connections per listener
    request_timeout_s: float = 10.0         # a connection idle this long (mid-request) is closed
    socket_gid: int | None = None           # group of the 0660 socket (the agent's gid)
    use_bwrap: bool = True                  # false: the run said --no-bwrap (no evaluator box)
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: str | Path) -> ServiceConfig:
        run_dir = Path(run_dir).resolve()
        path = run_dir / SERVICE_JSON
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunError(f"{path}: missing; the runtime writes it before starting the grader") \
                from None
        except ValueError as exc:
            raise RunError(f"{path}: not valid JSON: {exc}") from None
        return cls.from_dict(run_dir, raw)

    @classmethod
    def from_dict(cls, run_dir: Path, raw: dict[str, Any]) -> ServiceConfig:
        def p(key: str) -> Path | None:
            value = raw.get(key)
            return Path(value) if value else None

        where = f"{run_dir}/{SERVICE_JSON}"
        missing = [k for k in ("token", "output_dir") if not raw.get(k)]
        if missing:
            raise RunError(f"{where}: missing {', '.join(missing)}")
        if not raw.get("socket_path") and raw.get("port") is None:
            raise RunError(f"{where}: needs socket_path or port")
        output_dir = Path(raw["output_dir"])
        return cls(
            run_dir=run_dir, token=str(raw["token"]), output_dir=output_dir,
            agent_output_dir=str(raw.get("agent_output_dir") or output_dir),
            workspace=p("workspace"), socket_path=raw.get("socket_path") or None,
            host=raw.get("host") or "127.0.0.1", port=raw.get("port"),
            deadline_unix=raw.get("deadline_unix"), max_submissions=raw.get("max_submissions"),
            min_interval_s=float(raw.get("min_interval_s") or 0),
            eval_timeout_s=float(raw.get("eval_timeout_s") or 3600),
            bundle=p("bundle"), heldout=p("heldout"),
            engine=raw.get("engine") or raw.get("backend") or "auto",
            base_model=p("base_model"), baseline_cache=p("baseline_cache"),
            task_id=raw.get("task_id"), grader=raw.get("grader"),
            evaluator=raw.get("evaluator"), snapshots=raw.get("snapshots", True) is not False,
            baseline=bool(raw.get("baseline", False)),
            max_submission_bytes=int(raw.get("max_submission_bytes") or 64 << 30),
            max_submission_files=int(raw.get("max_submission_files") or 10_000),
            max_connections=int(raw.get("max_connections") or 32),
            request_timeout_s=float(raw.get("request_timeout_s") or 10.0),
            socket_gid=(int(raw["socket_gid"]) if raw.get("socket_gid") is not None else None),
            use_bwrap=raw.get("use_bwrap", True) is not False,
            raw=raw,
        )

    # ------------------------------------------------------------------ derived
    def bundle_manifest(self) -> dict[str, Any] | None:
        if self.bundle and (self.bundle / "bundle.json").is_file():
            return json.loads((self.bundle / "bundle.json").read_text(encoding="utf-8"))
        return None

    def grader_config(self) -> GraderSpec:
        """The grader section: service.json `grader`, else grader/grader.json (run, then bundle),
        else the resolved task's `grader` in bundle.json."""
        if self.grader:
            return GraderSpec.from_dict(self.grader)
        return GraderSpec.from_dict(load_grader_config(self.bundle, self.run_dir))

    def resolved_task_id(self) -> str:
        if self.task_id:
            return self.task_id
        try:
            grader_task = self.grader_config().extra.get("task_id")
        except RunError:
            grader_task = None
        if grader_task:
            return str(grader_task)
        manifest = self.bundle_manifest()
        if manifest:
            return manifest.get("id") or manifest.get("task", {}).get("id", "unknown")
        return "unknown"

    def evaluator_command(self) -> list[str]:
        return list(self.evaluator) if self.evaluator else [sys.executable, "-m", EVALUATOR_MODULE]


def read_grader_json(path: Path) -> dict[str, Any]:
    """One grader.json: the grader section (a file nesting it under `grader` is unwrapped)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "kind" not in data and isinstance(data.get("grader"), dict):
        data = data["grader"]
    return data


def read_grader_spec(path: Path) -> GraderSpec:
    """One grader.json, typed (ValueError or AttributeError when it is not a grader section)."""
    return GraderSpec.from_dict(read_grader_json(path))


def as_grader_spec(grader: GraderSpec | dict[str, Any] | None) -> GraderSpec:
    """A grader section typed: one already typed as is, a parsed grader.json (or a task's
    `grader`) read into a `GraderSpec` here, once."""
    if isinstance(grader, GraderSpec):
        return grader
    return GraderSpec.from_dict(dict(grader or {}))


def load_grader_config(bundle: Path | None, run_dir: Path | None = None) -> dict[str, Any]:
    candidates = []
    if run_dir is not None:
        candidates.append(Path(run_dir) / GRADER_JSON)
    if bundle is not None:
        candidates.append(Path(bundle) / GRADER_JSON)
    for path in candidates:
        if path.is_file():
            return read_grader_json(path)
    if bundle is not None and (Path(bundle) / "bundle.json").is_file():
        manifest = json.loads((Path(bundle) / "bundle.json").read_text(encoding="utf-8"))
        grader = manifest.get("task", {}).get("grader")
        if grader:
            return grader
    raise RunError(f"no grader configuration found (looked in {', '.join(map(str, candidates))} "
                   f"and {bundle}/bundle.json)")
