"""The run's header (who, what, when, under which budget) and its submissions table, as the
report (and the leaderboard) read them from a run record."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from a2c.contracts.event_payloads import AgentExited, AgentStarted, RunResumed, RunStarted
from a2c.contracts.records import Record
from a2c.contracts.spec import BaseModelSpec
from a2c.modes import FREE
from a2c.timefmt import iso_utc

from .record import RunRecord
from .rows import SubmissionRow
from .values import finite


@dataclass
class RunHeader(Record):
    """The report's `run` section (its JSON, in this order): who, what, when, under which
    budget, and the agent's stretches of work (`agent_stretches`)."""

    run_id: str = ""
    task: Any = None
    level: Any = None
    agent: Any = None
    driver: Any = None
    mode: Any = FREE
    seed: Any = None
    base_model: Any = None
    budget: dict[str, Any] = field(default_factory=dict)
    bundle_digest: Any = None
    spec_hash: Any = None
    isolation: Any = None
    status: Any = None
    started_at: str | None = None
    ended_at: str | None = None
    agent_started_at: str | None = None
    agent_ended_at: str | None = None
    deadline: str | None = None
    duration_s: float | None = None
    agent_time_s: float | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    interruptions: list[dict[str, Any]] = field(default_factory=list)
    agent_active_s: float | None = None


def run_header(record: RunRecord) -> RunHeader:
    """The report's `run` section: run.json, falling back to the run_started event's data."""
    run = record.run          # run.json as written: a key it lacks falls back to the event's
    started = record.first_payload(RunStarted)
    sdata = started.data.to_dict() if started else {}

    def pick(key: str, default: Any = None) -> Any:
        value = run.get(key)
        value = sdata.get(key) if value is None else value
        return default if value is None else value

    versions = pick("versions", {}) or {}
    duration = None
    if record.started_at is not None and record.ended_at is not None:
        duration = round(record.ended_at - record.started_at, 3)
    base_model = base_model_name(pick("base_model"))
    stretches = agent_stretches(record)
    return RunHeader(
        run_id=str(pick("run_id", record.root.name)),
        task=pick("task"), level=pick("level"), agent=pick("agent"),
        driver=pick("driver"), mode=pick("mode", FREE), seed=pick("seed"),
        base_model=base_model if isinstance(base_model, (str, dict)) or base_model is None
        else str(base_model),
        budget=record.budget, bundle_digest=pick("bundle_digest"),
        spec_hash=pick("spec_hash"), isolation=pick("isolation"), status=pick("status"),
        started_at=iso_utc(record.started_at), ended_at=iso_utc(record.ended_at),
        agent_started_at=iso_utc(record.clock_start),
        agent_ended_at=iso_utc(record.agent_ended_at),
        deadline=iso_utc(record.deadline), duration_s=duration,
        agent_time_s=None if record.clock_start is None or record.agent_ended_at is None
        else round(record.agent_ended_at - record.clock_start, 3),
        versions=versions if isinstance(versions, dict) else {},
        interruptions=stretches.interruptions, agent_active_s=stretches.agent_active_s)


@dataclass(frozen=True)
class Stretches:
    interruptions: list[dict[str, Any]]
    agent_active_s: float | None


def agent_stretches(record: RunRecord) -> Stretches:
    """`interruptions` (each resume: when the runtime stopped, when it resumed, the seconds lost,
    whether the agent was relaunched) and `agent_active_s` (the seconds the agent actually ran,
    the sum of its agent_started → agent_exited stretches). A resume never moves the deadline,
    so the budget clock (`agent_time_s`) runs on through an interruption; these say by how much."""
    out: list[dict[str, Any]] = []
    active, start, prev_ts = 0.0, None, None
    for event in record.stamped_events:
        ts, data = event.ts, event.data
        if isinstance(data, AgentStarted):
            start = ts
            if data.resumed and out:
                out[-1]["agent_relaunched"] = True
        elif isinstance(data, AgentExited) and start is not None and ts is not None:
            active, start = active + ts - start, None
        elif isinstance(data, RunResumed):
            if start is not None and prev_ts is not None:   # the agent died with the runtime
                active, start = active + prev_ts - start, None
            out.append({"resume": data.resume, "stopped_at": iso_utc(prev_ts),
                        "resumed_at": iso_utc(ts), "t_s": record.rel_time(prev_ts),
                        "lost_s": None if ts is None or prev_ts is None
                        else round(ts - prev_ts, 3), "agent_relaunched": False})
        if ts is not None:
            prev_ts = ts
    if start is not None and record.agent_ended_at is not None:
        active += max(0.0, record.agent_ended_at - start)
    ran = record.payloads(AgentStarted)
    return Stretches(out, round(active, 3) if ran else None)


@dataclass(frozen=True)
class PreparedModel(Record):
    """run.json's `base_model`: the spec it was prepared from, where it is, its fingerprint."""

    spec: Any = None
    path: Any = None
    fingerprint: Any = None


def base_model_name(value: Any) -> Any:
    """`builtin:tiny`, `hub:Qwen/Qwen3-8B-Base@main`, `path:/models/x` from a spec or a
    run.json base_model object ({spec, path, fingerprint}); strings pass through."""
    if isinstance(value, dict):
        prepared = PreparedModel.from_dict(value)
        spec = BaseModelSpec.from_dict(prepared.spec if isinstance(prepared.spec, dict)
                                       else value)
        if spec.builtin is not None:
            return f"builtin:{spec.builtin}"
        if spec.hub is not None:
            return f"hub:{spec.hub}" + (f"@{spec.revision}" if spec.revision else "")
        if spec.path is not None:
            return f"path:{spec.path}"
        return json.dumps(value, sort_keys=True)
    return value


def submission_rows(record: RunRecord, baseline: float | None) -> list[SubmissionRow]:
    """The report's `submissions`: one row per submission, with the best score so far and
    whether it improved on it (copies of the base model never count)."""
    out = []
    best: float | None = None
    for sub in record.submissions:
        improved = False
        if sub.valid and sub.score is not None and not sub.base_copy and (
                best is None or sub.score > best):
            improved = best is not None or baseline is None or sub.score > baseline
            best = sub.score if best is None else max(best, sub.score)
        out.append(SubmissionRow(
            id=sub.id, index=sub.index, t_s=record.rel_time(sub.received_at),
            received_at=iso_utc(sub.received_at), scored_at=iso_utc(sub.scored_at),
            scored=sub.scored, valid=sub.valid, score=finite(sub.score),
            ci95=sub.ci95, error=sub.error, duplicate_of=sub.duplicate_of,
            base_copy=sub.base_copy, note=sub.note, model_path=sub.model_path,
            weights_hash=sub.weights_hash, elapsed_s=finite(sub.elapsed_s),
            backend=sub.backend, result_file=sub.result_file, snapshot=sub.snapshot,
            best_so_far=best, improved=improved))
    return out


def rows_as_dicts(rows: list[SubmissionRow]) -> list[dict[str, Any]]:
    """The rows as the report's JSON holds them (for the readers that take that JSON)."""
    return [row.to_dict() for row in rows]
