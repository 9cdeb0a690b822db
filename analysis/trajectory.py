"""A run's trajectory (RUN/trajectory.json, a2c.contracts.trajectory; docs/trajectory.md), built
from the driver gateway's call record and enriched from the scaffold's native transcript.

The gateway's record is the one source that is the same for every scaffold: the replay of its
`driver_call` events makes the steps (analysis/conversation.py), the scaffold's transcript
lengthens their outputs and adds exit codes (analysis/transcripts.py), and this module adds the
totals and the run's identity, checks a stored trajectory.json against what the record builds,
and writes it. A step that cannot be read is kept with what is known; a record that cannot be
read at all is named in `extra.warnings`, never raised.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c import __version__
from a2c.canonical import canonical_json
from a2c.contracts.bundle import read_manifest
from a2c.contracts.events import (
    DriverBudgetExhausted,
    DriverCall,
    EventPayload,
    RunStarted,
    payload_of,
    read_events_tolerant,
)
from a2c.contracts.run_info import read_run_mapping
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.trajectory import (
    AgentExtra,
    AgentInfo,
    BudgetExhaustion,
    FinalExtra,
    FinalMetrics,
    StepExtra,
    ThreadSummary,
    Trajectory,
    TrajectoryExtra,
    validate_trajectory,
)
from a2c.fsutil import write_text_atomic
from a2c.wires import generation_call

from .conversation import Replay, Thread, as_float, as_int, wire_of
from .step_drafts import DraftStep
from .transcripts import enrich, transcript_path

# The gateway's own refusals (runtime/driver_gateway/server.py): never forwarded upstream.
REFUSED = ("auth", "not_served", "bad_request", "model", "budget")
TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
TOTALS = ("total_prompt_tokens", "total_completion_tokens", "total_cached_tokens")
COMPARED = ("session_id", "agent", "final_metrics")
NOTES = ("Built by a2c from the driver gateway's call record (driver_call events and "
         "driver/blobs); prompt_tokens is the whole prompt (the gateway's uncached "
         "input_tokens + cache_read_tokens + cache_write_tokens), cached_tokens its "
         "cache_read_tokens. See docs/trajectory.md.")


@dataclass(frozen=True)
class _Identity:
    """Who ran: run.json's word, else the signed run_started event's (a run that ended before
    run.json was written)."""

    run_id: str | None = None
    task: str | None = None
    agent: str | None = None
    driver: str | None = None
    agent_digest: str | None = None
    transcript: str | None = None

    @classmethod
    def of(cls, run: dict[str, Any], started: RunStarted) -> _Identity:
        def pick(key: str) -> Any:
            return run.get(key) or getattr(started, key, None)

        named = run.get("transcript")
        return cls(run_id=pick("run_id"), task=pick("task"), agent=pick("agent"),
                   driver=pick("driver"), agent_digest=pick("agent_digest"),
                   transcript=named if isinstance(named, str) else None)


def _read_run(run_dir: Path) -> dict[str, Any]:
    try:
        return read_run_mapping(run_dir)
    except (OSError, ValueError):
        return {}


def _typed_events(run_dir: Path) -> list[tuple[str | None, EventPayload]]:
    """(time, typed payload) of each event of a type this a2c knows."""
    rows, _ = read_events_tolerant(run_dir)
    out = []
    for row in rows:
        payload = payload_of(row)
        if payload is not None:
            out.append((row.get("ts"), payload))
    return out


def _tool_counts(steps: list[DraftStep]) -> tuple[dict[str, int], dict[str, int]]:
    kinds: Counter[str] = Counter()
    names: Counter[str] = Counter()
    for step in steps:
        for call in step.tool_calls:
            kinds[call.extra.kind or "other"] += 1
            names[call.function_name] += 1
    return dict(sorted(kinds.items())), dict(names.most_common())


def _final(calls: list[DriverCall], exhausted: list[BudgetExhaustion],
           steps: list[DraftStep], threads: list[Thread]) -> FinalMetrics:
    def total(kind: str) -> int:
        return sum(as_int(getattr(c, kind)) for c in calls)

    by_kind, by_name = _tool_counts(steps)
    models: Counter[str] = Counter(str(c.response_model or c.model)
                                   for c in calls if c.response_model or c.model)
    errors = sum(1 for c in calls if as_int(c.status) >= 400 or
                 (c.error and c.error != "client_gone"))
    refused = sum(1 for c in calls if c.error in REFUSED)
    forwarded = sum(1 for c in calls if c.error not in REFUSED and
                    generation_call(wire_of(c), c.path))
    return FinalMetrics(
        total_prompt_tokens=total("input_tokens") + total("cache_read_tokens")
        + total("cache_write_tokens"),
        total_completion_tokens=total("output_tokens"),
        total_cached_tokens=total("cache_read_tokens"),
        total_cost_usd=round(sum(as_float(c.cost_usd) for c in calls), 10),
        total_steps=len(steps),
        extra=FinalExtra(
            calls=forwarded, refused=refused, recorded=len(calls), errors=errors,
            input_tokens=total("input_tokens"), cache_write_tokens=total("cache_write_tokens"),
            tokens=sum(total(k) for k in TOKEN_KINDS), models=dict(models.most_common()),
            budget_exhausted=tuple(exhausted), tool_calls_by_kind=by_kind,
            tool_calls_by_name=by_name,
            threads=tuple(ThreadSummary(t.number, t.calls, t.first) for t in threads)))


def _agent_version(root: Path, identity: _Identity) -> str:
    """The scaffold's version from the agent bundle (RUN/agent/agent.json) when it names one,
    else the agent bundle's digest (short), else "unknown"."""
    try:
        manifest = read_manifest(RunPaths(root).agent, "Agent")
    except (OSError, ValueError):
        manifest = {}
    spec = manifest.get("agent") if isinstance(manifest, dict) else None
    if isinstance(spec, dict):
        for key in ("version", "cli_version"):
            if isinstance(spec.get(key), (str, int, float)):
                return str(spec[key])
    return str(identity.agent_digest)[:16] if identity.agent_digest else "unknown"


def _replay(root: Path, events: list[tuple[str | None, EventPayload]]) -> Replay:
    replay = Replay(root)
    for ts, payload in events:
        if isinstance(payload, DriverCall):
            try:
                replay.call(payload, ts)
            except Exception as exc:  # noqa: BLE001 - a record must never stop the report
                replay.warnings.append(f"driver call {payload.seq}: not read "
                                       f"({type(exc).__name__}: {exc})")
        elif isinstance(payload, DriverBudgetExhausted):
            replay.add_step("system", f"driver budget exhausted: {payload.limit} "
                            f"{payload.used} of {payload.budget}", ts,
                            StepExtra(event="driver_budget_exhausted"))
    return replay


def trajectory_of(run_dir: str | Path) -> Trajectory:
    """The run's trajectory (never raises on a damaged or unknown record: what could not be
    read is in extra.warnings)."""
    root = Path(run_dir)
    run = _read_run(root)
    events = _typed_events(root)
    started = next((p for _, p in events if isinstance(p, RunStarted)), RunStarted())
    identity = _Identity.of(run, started)
    replay = _replay(root, events)
    transcript = transcript_path(root, identity.transcript)
    try:
        enriched = enrich(replay.steps, transcript)
    except Exception as exc:  # noqa: BLE001
        enriched = False
        replay.warnings.append(f"{transcript}: not read ({type(exc).__name__}: {exc})")
    calls = [p for _, p in events if isinstance(p, DriverCall)]
    exhausted = [BudgetExhaustion(p.limit, p.budget, p.used, p.seq, ts)
                 for ts, p in events if isinstance(p, DriverBudgetExhausted)]
    threads = sorted(replay.threads.values(), key=lambda t: t.number)
    final = _final(calls, exhausted, replay.steps, threads)
    sources = ("driver",) + ((f"transcript:{transcript.relative_to(root).as_posix()}",)
                             if transcript and enriched else ())
    return Trajectory(
        session_id=str(identity.run_id or root.name),
        agent=AgentInfo(name=str(identity.agent or "unknown"),
                        version=_agent_version(root, identity),
                        model_name=next(iter(final.extra.models), None) if final.extra else None,
                        extra=AgentExtra(driver=identity.driver)),
        steps=tuple(s.freeze() for s in replay.steps),
        notes=NOTES, final_metrics=final,
        extra=TrajectoryExtra(run_id=identity.run_id, task=identity.task,
                              driver=identity.driver,
                              wires=tuple(sorted({c.wire for c in calls if c.wire})),
                              sources=sources, warnings=tuple(replay.warnings[:200]),
                              a2c_version=__version__))


def build_trajectory(run_dir: str | Path) -> dict[str, Any]:
    """The run's trajectory as the JSON trajectory.json holds (it validates against
    trajectory.schema.json)."""
    return trajectory_of(run_dir).to_dict()


def _same_version_problems(stored: dict[str, Any], built: Trajectory) -> list[str]:
    """Every step and total of a trajectory.json this a2c version wrote, against the record."""
    built_json = built.to_dict()
    for key in COMPARED:
        if canonical_json(stored.get(key)) != canonical_json(built_json.get(key)):
            return [f"{key} differs from what the driver record builds"]
    have_steps = stored["steps"]
    if len(have_steps) != len(built.steps):
        return [f"{len(have_steps)} steps, the driver record builds {len(built.steps)}"]
    for have, want in zip(have_steps, built.steps):
        if canonical_json(have) != canonical_json(want.to_dict()):
            return [f"step {want.step_id} differs from what the driver record builds"]
    return []


def _totals_problems(stored: Trajectory, built: Trajectory, version: str | None) -> list[str]:
    """The totals of a trajectory.json another a2c version wrote (they do not depend on how a
    version reads the bodies)."""
    have, want = stored.final_metrics, built.final_metrics

    def value(metrics: FinalMetrics | None, key: str) -> Any:
        return getattr(metrics, key) if metrics is not None else None

    for key in TOTALS:
        if value(have, key) != value(want, key):
            return [f"final_metrics.{key} {value(have, key)!r} differs from the driver record's "
                    f"{value(want, key)!r} (written by a2c {version})"]
    cost_have, cost_want = value(have, "total_cost_usd"), value(want, "total_cost_usd")
    if abs(float(cost_have or 0) - float(cost_want or 0)) > 1e-9:
        return [f"final_metrics.total_cost_usd {cost_have!r} differs from the driver record's "
                f"{cost_want!r} (written by a2c {version})"]
    return []


def trajectory_problems(run_dir: str | Path) -> list[str]:
    """How RUN/trajectory.json departs from what the run's record builds (empty when it
    matches, or when there is none): the schema, then — written by this a2c version — every
    step and total; written by another version, the totals. The driver record itself is
    checked apart (driver/blobs)."""
    root = Path(run_dir)
    path = RunPaths(root).trajectory
    if not path.is_file():
        return []
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return [f"not readable JSON ({exc})"]
    problems = validate_trajectory(stored)
    if problems:
        return [f"does not validate: {problems[0]}"]
    built = trajectory_of(root)
    typed = Trajectory.from_dict(stored)
    version = typed.extra.a2c_version if typed.extra else None
    if version == __version__:
        return _same_version_problems(stored, built)
    return _totals_problems(typed, built, version)


def write_trajectory(run_dir: str | Path) -> Path:
    """Build the trajectory and write RUN/trajectory.json (atomic, 0600 like the record);
    returns its path. Raises ValueError if what was built does not validate (a bug)."""
    root = Path(run_dir)
    data = build_trajectory(root)
    problems = validate_trajectory(data)
    if problems:
        raise ValueError(f"{root}: the trajectory built does not validate: {problems[0]}")
    path = RunPaths(root).trajectory
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n", mode=0o600)
    return path


def maybe_write_trajectory(run_dir: str | Path) -> Path | None:
    """After any run (the CLI's call once `a2c run` / a sweep trial / a resume ends): write
    RUN/trajectory.json when the run's agent called a driver through the gateway; None when it
    did not (a scripted agent) or the trajectory could not be written (never raises: the run
    is over and recorded either way; `a2c verify` names a stale or missing-body record)."""
    root = Path(run_dir)
    try:
        if not any(isinstance(p, DriverCall) for _, p in _typed_events(root)):
            return None
        return write_trajectory(root)
    except (OSError, ValueError):
        return None
