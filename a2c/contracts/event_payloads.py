"""What each line of `events.jsonl` says: one payload class per event type (`EVENT_TYPES`),
the envelope (`Event`) and `payload_of(event)`, the typed payload of an event as read.

Apart from the chain (a2c.contracts.event_chain) and its writer (a2c.contracts.events): the
runtime writes these and the analysis reads them, and neither needs to know how a line is
hashed or signed to do so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .event_chain import GENESIS
from .records import Record, ScoredFields, optional


@dataclass
class EventPayload(Record):
    TYPE: ClassVar[str] = ""


@dataclass
class RunStarted(EventPayload):
    """The run's identity (a subset of run.json, written by the runtime at the first start)."""

    TYPE: ClassVar[str] = "run_started"
    run_id: str | None = None
    task: str | None = None
    level: int | None = optional()
    agent: str | None = None
    agent_digest: str | None = optional()
    driver: str | None = None
    mode: str | None = None
    seed: int | None = None
    backend: str | None = optional()  # the sandbox backend: local | docker
    isolation: str | None = optional()
    base_model: Any = optional()
    data: dict[str, Any] | None = optional()
    bundle_digest: str | None = None
    spec_hash: str | None = optional()
    budget: dict[str, Any] | None = None
    scoring: dict[str, Any] | None = optional()
    versions: dict[str, Any] | None = optional()
    driver_server: dict[str, Any] | None = optional()   # a vllm/ driver a2c served: digest, flags


@dataclass
class RunResumed(EventPayload):
    TYPE: ClassVar[str] = "run_resumed"
    resume: int | None = None
    pending: list[str] = field(default_factory=list)
    deadline: float | None = None
    agent_exit: dict[str, Any] | None = None


@dataclass
class BaselineScored(EventPayload):
    TYPE: ClassVar[str] = "baseline_scored"
    score: float | None = None
    ci95: list[float] | None = None
    valid: bool | None = optional()
    error: str | None = optional()
    cached: bool | None = optional()
    key: str | None = optional()
    elapsed_s: float | None = None
    backend: str | None = None  # the inference engine that scored it (key kept: a record format)
    weights_hash: str | None = optional()


@dataclass
class AgentStarted(EventPayload):
    TYPE: ClassVar[str] = "agent_started"
    deadline: float | None = None
    wall_clock_s: float | None = None
    isolation: str | None = None
    resumed: bool = False


@dataclass
class SubmissionReceived(EventPayload):
    TYPE: ClassVar[str] = "submission_received"
    id: int | str = 0
    model_path: str | None = None
    weights_hash: str | None = None
    note: str | None = optional()


@dataclass
class SubmissionPruned(EventPayload):
    """The grader removed its copy of a scored submission that can no longer count (neither the
    best nor the last valid one, nor the original of either); the journal keeps its hash
    (runtime/grader_service/pruning.py)."""

    TYPE: ClassVar[str] = "submission_pruned"
    id: int | str = 0
    weights_hash: str | None = None
    bytes: int | None = None


@dataclass
class SubmissionScored(ScoredFields, EventPayload):
    """A scored (or invalid) submission. `code` (a2c.contracts.submission_errors) says why it is
    invalid; `copy_of_base` whether its weights are the untouched base model's; `not_derived`
    whether the provenance check found it is not derived from the base (another model's weights,
    a re-initialised model; the details are in results/<n>.json `provenance`). Its fields are
    a2c.contracts.records.ScoredFields, shared with the journal's `scored` line."""

    TYPE: ClassVar[str] = "submission_scored"


@dataclass
class Snapshot(EventPayload):
    TYPE: ClassVar[str] = "snapshot"
    commit: str = ""
    reason: str | None = None            # submission | periodic | final
    submission_id: int | str | None = None
    files: int | None = None
    bytes: int | None = None
    changed: bool | None = optional()
    excluded: int | None = optional()


@dataclass
class BudgetWarning(EventPayload):
    TYPE: ClassVar[str] = "budget_warning"
    fraction: float | None = optional()
    used_s: float | None = optional()
    remaining_s: float | None = None


@dataclass
class DeadlineReached(EventPayload):
    TYPE: ClassVar[str] = "deadline_reached"
    deadline: float | None = None
    wall_clock_s: float | None = None
    note: str | None = optional()


@dataclass
class AgentExited(EventPayload):
    TYPE: ClassVar[str] = "agent_exited"
    returncode: int | None = None
    reason: str | None = None
    stop: dict[str, Any] | None = optional()
    cause: str | None = optional()       # why, where the code does not say (out of memory)


@dataclass
class RunFinished(EventPayload):
    TYPE: ClassVar[str] = "run_finished"
    baseline_score: float | None = None
    best_score: float | None = None
    final_score: float | None = None
    submissions: int | None = optional()
    valid_submissions: int | None = optional()
    status: str | None = optional()
    final_split_score: float | None = optional()        # the counted submission, final split
    final_split_baseline: float | None = optional()     # the base model, final split
    selection_gap: float | None = optional()            # feedback gain - final gain


@dataclass
class RecordSealed(EventPayload):
    """The digests of the record's files, written by the runtime as the last event of a run (at
    its end, after a failure, and again at the end of each resume): `files` maps each sealed
    path (run.json, submissions.jsonl, results/*, logs/*, agent/prompt.rendered.md) to
    {"sha256", "size"}, and "data/" to {"tree", "files"}; see a2c.contracts.seal. A log is append-only: an earlier seal holds for
    its first `size` bytes."""

    TYPE: ClassVar[str] = "record_sealed"
    reason: str | None = None
    files: dict[str, Any] = field(default_factory=dict)


@dataclass
class DriverCall(EventPayload):
    """One request the agent made to its driver model through the gateway (runtime/driver_gateway).
    Tokens are the provider's own usage fields (streamed ones included); `request_sha256` and
    `response_sha256` name the bodies in RUN/driver/blobs; `status` is the HTTP status the agent
    got; `error` says why the gateway answered itself (budget, auth, model, upstream down)."""

    TYPE: ClassVar[str] = "driver_call"
    seq: int = 0
    driver: str | None = None                # the run's driver, e.g. anthropic/claude-sonnet-4-5
    wire: str | None = None                  # anthropic | openai-chat | openai-responses | gemini
    path: str | None = None
    model: str | None = None                 # the model the request named
    response_model: str | None = optional()  # the model the provider says answered
    stream: bool = False
    status: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float | None = None          # first byte of the upstream's answer
    duration_ms: float | None = None         # the whole call
    request_sha256: str | None = None
    response_sha256: str | None = optional()
    error: str | None = optional()
    usage_missing: bool | None = optional()
    # the output cap forwarded was lowered below the request's own because the served model's
    # context cannot hold it: {requested, forwarded, context, input_estimate, why}
    cap_lowered: dict[str, Any] | None = optional()


@dataclass
class DriverBudgetExhausted(EventPayload):
    """A driver budget (tokens, cost_usd or calls) was spent: the gateway refuses further calls
    in the scaffold's own error format; the run goes on to its normal end."""

    TYPE: ClassVar[str] = "driver_budget_exhausted"
    limit: str = ""                          # tokens | cost_usd | calls
    budget: float | None = None
    used: float | None = None
    seq: int | None = optional()


@dataclass
class FinalScored(EventPayload):
    """One score on the task's final split (`scoring.final`): held-out items the agent never got
    feedback on, scored once after the agent has stopped, for the submission the scoring policy
    counts (`subject: submission`, `submission_id`) and for the base model (`subject: baseline`).
    `feedback_score` is the same model's score on the feedback items; `result` the file with its
    per-item outputs (results/final-<id>.json, results/final-baseline.json)."""

    TYPE: ClassVar[str] = "final_scored"
    subject: str = "submission"              # submission | baseline
    submission_id: int | str | None = None
    score: float | None = None
    ci95: list[float] | None = None
    n_items: int | None = None
    valid: bool = False
    error: str | None = None
    feedback_score: float | None = None
    weights_hash: str | None = optional()
    cached: bool | None = optional()
    elapsed_s: float | None = None
    backend: str | None = None  # the inference engine that scored it (key kept: a record format)
    result: str | None = None


@dataclass
class ProcessRecorded(EventPayload):
    """A session of the host-side process recorder ended (a2c.contracts.process_record): the
    digest of logs/processes.jsonl as it then was (`sha256` of its first `size` bytes), how many
    processes and kept code files it holds, and the `problems` that make it incomplete."""

    TYPE: ClassVar[str] = "process_record"
    file: str = "logs/processes.jsonl"
    sha256: str = ""
    size: int = 0
    session: int = 0
    processes: int = 0
    captured: int = 0
    samples: int = 0
    interval_s: float | None = None
    cpu_s: float | None = None
    problems: list[str] = field(default_factory=list)


EVENT_TYPES: dict[str, type[EventPayload]] = {cls.TYPE: cls for cls in (
    RunStarted, RunResumed, BaselineScored, AgentStarted, SubmissionReceived, SubmissionScored,
    SubmissionPruned, Snapshot, BudgetWarning, DeadlineReached, AgentExited, RunFinished, RecordSealed,
    DriverCall, DriverBudgetExhausted, FinalScored, ProcessRecorded)}


@dataclass
class Event(Record):
    """One line of events.jsonl (the envelope; `data` is the type's payload as a dict)."""

    seq: int = 0
    ts: str = ""
    type: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    prev: str = GENESIS
    key: str | None = optional()     # the signing key's id (a2c.contracts.record_key)
    hash: str = ""
    sig: str | None = optional()     # Ed25519(operator's private key, hash), hex
    mac: str | None = optional()     # legacy records: HMAC-SHA256(record key, hash)


def payload_of(event: dict[str, Any]) -> EventPayload | None:
    """The typed payload of an event dict (None for a type this a2c does not know)."""
    cls = EVENT_TYPES.get(event.get("type"))  # type: ignore[arg-type]
    data = event.get("data")
    return cls.from_dict(data if isinstance(data, dict) else {}) if cls else None
