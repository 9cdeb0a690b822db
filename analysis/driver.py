"""The report's `driver` section: what the agent's driver model did, from the gateway's record
(the trajectory built from the `driver_call` events and their bodies, analysis/trajectory.py).

Model(s) as the provider named them, calls, tokens (input, output, cached), cost, whether a
driver budget ran out, tool calls by kind, the shell commands in order, for each submission the
steps that led to it (the steps after the previous submission up to this one's arrival, and the
step whose tool call ran `./submit`), and the steps themselves, clipped for reading.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from a2c.contracts.driver_server import ContextFit, DriverServerRecord, Weights
from a2c.contracts.events import DriverCall, RunStarted, payload_of
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.trajectory import (
    CallExtra,
    FinalExtra,
    FinalMetrics,
    Metrics,
    ObservationResult,
    ResultExtra,
    Step,
    ToolCall,
    TrajectoryExtra,
)
from a2c.timefmt import parse_time

from .record import RunRecord
from .rows import rows_of
from .trajectory import trajectory_of
from .values import clip

MAX_STEPS = 400
MAX_COMMANDS = 500
MESSAGE_WIDTH = 6000
ARG_WIDTH = 3000
OUTPUT_WIDTH = 3000
LONG = 600          # text longer than this is collapsed in the HTML


def _clipped(text: str | None, width: int) -> tuple[str, bool, int]:
    text = text or ""
    return clip(text, width), len(text) > width, len(text)


def _call_view(call: ToolCall) -> dict[str, Any]:
    extra = call.extra or CallExtra()
    shown = extra.command
    if shown is None:
        shown = json.dumps(call.arguments or {}, ensure_ascii=False, indent=1, sort_keys=True)
    text, cut, _ = _clipped(shown, ARG_WIDTH)
    return {"id": call.tool_call_id, "name": call.function_name, "kind": extra.kind,
            "shell": extra.command is not None, "text": text, "truncated": cut,
            "submits": bool(extra.submits)}


def _result_view(result: ObservationResult) -> dict[str, Any]:
    extra = result.extra or ResultExtra()
    content, cut, size = _clipped(result.content, OUTPUT_WIDTH)
    return {"call_id": result.source_call_id, "content": content, "truncated": cut,
            "chars": size, "exit_code": extra.exit_code, "is_error": bool(extra.is_error),
            "from_transcript": extra.source == "transcript"}


def _step_view(step: Step, record: RunRecord, submission: Any) -> dict[str, Any]:
    extra = step.details
    metrics = step.metrics or Metrics()
    message, cut, size = _clipped(step.message, MESSAGE_WIDTH)
    return {"step_id": step.step_id, "source": step.source,
            "t_s": record.rel_time(parse_time(step.timestamp)),
            "message": message, "message_truncated": cut, "message_chars": size,
            "long": size > LONG, "reasoning": clip(step.reasoning_content or "", 2000),
            "model": step.model_name, "thread": extra.thread,
            "call_seq": extra.call_seq, "error": extra.error, "status": extra.status,
            "input_tokens": metrics.extra.input_tokens if metrics.extra
            else metrics.prompt_tokens,
            "output_tokens": metrics.completion_tokens,
            "cached_tokens": metrics.cached_tokens, "cost_usd": metrics.cost_usd,
            "tool_calls": [_call_view(c) for c in step.calls],
            "results": [_result_view(r) for r in step.results], "submission": submission}


def _trajectory_file(record: RunRecord) -> str | None:
    """RUN/trajectory.json, relative to the run directory, when the run has one."""
    path = RunPaths(record.root).trajectory
    return path.relative_to(record.root).as_posix() if path.is_file() else None


@dataclass(frozen=True)
class ServedDriver:
    """run.json's (and run_started's) `driver_server` as the report shows it
    (runtime/run/driver.py `server_record` writes it)."""

    model: str | None = None
    served_model_name: str | None = None
    weights_fingerprint: str | None = None
    weights_note: str | None = None
    version: str | None = None
    argv: list[str] = field(default_factory=list)
    max_model_len: int | None = None
    tool_call_parser: str | None = None
    chat_template: str | None = None
    gpus: list[Any] = field(default_factory=list)
    sampling: dict[str, Any] = field(default_factory=dict)
    # the model's trained context when a2c stretched it for the scaffold, and for which one
    stretched_from: int | None = None
    stretched_for: str | None = None
    # a server shared by the node's runs (a sweep's trials): the run that started it
    shared_started_by: str | None = None

    @classmethod
    def of(cls, server: dict[str, Any]) -> ServedDriver:
        record = DriverServerRecord.from_dict(server)
        weights, context = record.weights or Weights(), record.context or ContextFit()
        return cls(model=record.model, served_model_name=record.served_model_name,
                   weights_fingerprint=weights.fingerprint, weights_note=weights.note,
                   version=record.version, argv=list(record.argv or ()),
                   max_model_len=record.max_model_len,
                   tool_call_parser=record.tool_call_parser,
                   chat_template=record.chat_template, gpus=list(record.gpus or ()),
                   sampling=server.get("sampling") or {},
                   stretched_from=context.trained if context.stretched else None,
                   stretched_for=context.needed_by if context.stretched else None,
                   shared_started_by=record.shared.started_by if record.shared else None)


def served_driver(record: RunRecord) -> dict[str, Any] | None:
    """What served a `vllm/` driver a2c started (weights' digest, server version and flags,
    context, sampling), from the signed run_started event (run.json's copy for a run that
    ended before it); None for a driver a2c did not serve."""
    event = record.first_event("run_started")
    started = payload_of(event) if event else None
    server = started.driver_server if isinstance(started, RunStarted) else None
    server = server or record.run.get("driver_server")
    return asdict(ServedDriver.of(server)) if isinstance(server, dict) else None


def _shell_commands(steps: Sequence[Step], times: list[float | None],
                    record: RunRecord) -> list[dict[str, Any]]:
    """Every shell command the agent ran, in order, with the exit code its result states."""
    commands = []
    for step, ts in zip(steps, times):
        results = {r.source_call_id: r for r in step.results}
        for call in step.calls:
            extra = call.extra or CallExtra()
            if extra.command is None:
                continue
            result = results.get(call.tool_call_id)
            commands.append({"step_id": step.step_id, "t_s": record.rel_time(ts),
                             "command": clip(extra.command, 400),
                             "exit_code": result.extra.exit_code if result and result.extra
                             else None,
                             "submits": bool(extra.submits)})
    return commands


def _usage(steps: list[Step]) -> dict[str, Any]:
    """The agent steps' calls, tokens (all four kinds, as the gateway counts tokens) and cost."""
    agent = [s for s in steps if s.source == "agent"]
    metrics = [s.metrics or Metrics() for s in agent]
    return {"calls": len(agent),
            "tokens": sum(int(m.prompt_tokens or 0) + int(m.completion_tokens or 0)
                          for m in metrics),
            "cost_usd": round(sum(float(m.cost_usd or 0.0) for m in metrics), 6)}


def _submits(step: Step) -> bool:
    return any(c.extra is not None and c.extra.submits for c in step.calls)


def _per_submission(steps: Sequence[Step], times: list[float | None],
                    subs: list[dict[str, Any]], commands: list[dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], dict[int, Any], float | None]:
    """For each submission, the steps after the previous one up to its arrival; the submission
    each step led to; and the time the last one arrived."""
    per_sub = []
    owner: dict[int, Any] = {}
    command_steps = [c["step_id"] for c in commands]
    previous = None
    for row in rows_of(subs):
        received = parse_time(row.received_at)
        members = [s for s, ts in zip(steps, times) if ts is not None and received is not None
                   and ts <= received and (previous is None or ts > previous)]
        ids = {s.step_id for s in members}
        owner.update((sid, row.id) for sid in ids)
        per_sub.append({
            "id": row.id, "t_s": row.t_s, "score": row.score,
            "valid": row.valid, "steps": [s.step_id for s in members],
            "submit_step": next((s.step_id for s in reversed(members) if _submits(s)), None),
            **_usage(members),
            "shell_commands": sum(1 for sid in command_steps if sid in ids)})
        if received is not None:
            previous = received
    return per_sub, owner, previous


def _budget_exhausted(extra: FinalExtra, record: RunRecord) -> list[dict[str, Any]]:
    return [{"limit": e.limit, "budget": e.budget, "used": e.used,
             "t_s": record.rel_time(parse_time(e.timestamp))} for e in extra.budget_exhausted]


def _totals(final: FinalMetrics) -> dict[str, Any]:
    extra = final.extra or FinalExtra()
    return {"models": extra.models, "calls": int(extra.calls or 0),
            "errors": int(extra.errors or 0), "refused": int(extra.refused or 0),
            "input_tokens": int(extra.input_tokens or 0),
            "output_tokens": int(final.total_completion_tokens or 0),
            "cached_tokens": int(final.total_cached_tokens or 0),
            "cache_write_tokens": int(extra.cache_write_tokens or 0),
            "tokens": int(extra.tokens or 0),
            "cost_usd": float(final.total_cost_usd or 0.0)}


def _caps_lowered(record: RunRecord) -> list[dict[str, Any]]:
    calls = [payload_of(e) for e in record.events_of("driver_call")]
    return [{"seq": c.seq, **c.cap_lowered} for c in calls
            if isinstance(c, DriverCall) and isinstance(c.cap_lowered, dict)]


def driver_section(record: RunRecord, subs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """None for a run without driver calls (a scripted agent, or a record from before the
    gateway)."""
    if not record.events_of("driver_call"):
        return None
    trajectory = trajectory_of(record.root)
    final = trajectory.final_metrics or FinalMetrics()
    fextra = final.extra or FinalExtra()
    textra = trajectory.extra or TrajectoryExtra()
    steps = trajectory.steps
    times = [parse_time(s.timestamp) for s in steps]
    commands = _shell_commands(steps, times, record)
    per_sub, owner, previous = _per_submission(steps, times, subs, commands)
    rest = [s for s, ts in zip(steps, times) if previous is None or ts is None or ts > previous]
    views = [_step_view(s, record, owner.get(s.step_id)) for s in steps[:MAX_STEPS]]
    budget = {k: v for k, v in (record.budget or {}).items() if str(k).startswith("driver_")}
    return {
        "available": True, **_totals(final),
        "budget": budget, "budget_exhausted": _budget_exhausted(fextra, record),
        "tool_calls_by_kind": fextra.tool_calls_by_kind,
        "tool_calls_by_name": fextra.tool_calls_by_name,
        "shell_commands": commands[:MAX_COMMANDS],
        "shell_commands_total": len(commands),
        "submissions": per_sub,
        "after_last_submission": {"steps": [s.step_id for s in rest], **_usage(rest)},
        "steps": views, "steps_total": len(steps),
        "threads": [t.to_dict() for t in fextra.threads],
        "sources": list(textra.sources), "warnings": list(textra.warnings[:20]),
        "trajectory_file": _trajectory_file(record),
        "server": served_driver(record),
        "caps_lowered": _caps_lowered(record),
    }
