"""`RUN/trajectory.json`: a run's steps in one versioned schema for every scaffold
(docs/trajectory.md).

Built by the analysis (analysis/trajectory.py) from the driver gateway's call record — the
`driver_call` events and the bodies in RUN/driver/blobs — and enriched from the scaffold's native
transcript. The layout follows Harbor's ATIF (Agent Trajectory Interchange Format, v1.4) where it
fits, so ATIF readers can load it: `schema_version`, `session_id`, `agent`, `steps` (each with
`source` system | user | agent, `message`, `tool_calls`, `observation.results`, `metrics`) and
`final_metrics`; what ATIF has no field for lives in `extra` (ATIF's own extension point).
`format` names this record's version. Token counts are the gateway's (the provider's own usage
fields): as in ATIF, `prompt_tokens` is the whole prompt — the call's uncached `input_tokens` +
`cache_read_tokens` + `cache_write_tokens` — and `cached_tokens` its `cache_read_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .parts import Part
from .records import optional

TRAJECTORY_FORMAT = "a2c-trajectory/1"
ATIF_VERSION = "ATIF-v1.4"
SOURCES = ("system", "user", "agent")
TOOL_KINDS = ("shell", "edit", "read", "search", "web", "plan", "submit", "other")


# ----------------------------------------------------------------------------- the extras
# What ATIF has no field for, one class per part; written in `extra` (the schema keeps `extra`
# an open object, so a reader of ATIF or of an older a2c takes it as it is).
@dataclass(frozen=True)
class AgentExtra(Part):
    driver: str | None = None


@dataclass(frozen=True)
class CallExtra(Part):
    """`kind` the tool's kind (TOOL_KINDS), `command` a shell tool's command line, `submits`
    whether it runs ./submit, `parsed_from` "message" for a ```bash block in the text."""

    kind: str = "other"
    command: str | None = optional()
    submits: bool | None = optional()
    parsed_from: str | None = optional()


@dataclass(frozen=True)
class ResultExtra(Part):
    """`source` "transcript" when the scaffold's own transcript gave a longer output."""

    is_error: bool | None = optional()
    exit_code: int | None = optional()
    source: str | None = optional()


@dataclass(frozen=True)
class MetricsExtra(Part):
    input_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class StepExtra(Part):
    """`thread` the conversation thread, `from_request` an agent turn seen only in a later
    request, `event` the event a system step stands for."""

    call_seq: int | None = optional()
    thread: int | None = optional()
    wire: str | None = optional()
    status: int | None = optional()
    error: str | None = optional()
    latency_ms: float | None = optional()
    duration_ms: float | None = optional()
    stop_reason: str | None = optional()
    from_request: bool | None = optional()
    event: str | None = optional()


@dataclass(frozen=True)
class BudgetExhaustion(Part):
    """A `driver_budget_exhausted` event, as the totals list it."""

    limit: str | None = None
    budget: float | None = None
    used: float | None = None
    seq: int | None = None
    timestamp: str | None = None


@dataclass(frozen=True)
class ThreadSummary(Part):
    thread: int = 0
    calls: int = 0
    first_message: str = ""


@dataclass(frozen=True)
class FinalExtra(Part):
    calls: int = 0
    refused: int = 0
    recorded: int = 0
    errors: int = 0
    input_tokens: int = 0
    cache_write_tokens: int = 0
    tokens: int = 0
    models: dict[str, int] = field(default_factory=dict)
    budget_exhausted: tuple[BudgetExhaustion, ...] = ()
    tool_calls_by_kind: dict[str, int] = field(default_factory=dict)
    tool_calls_by_name: dict[str, int] = field(default_factory=dict)
    threads: tuple[ThreadSummary, ...] = ()


@dataclass(frozen=True)
class TrajectoryExtra(Part):
    run_id: str | None = None
    task: str | None = None
    driver: str | None = None
    wires: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    a2c_version: str | None = None


# ----------------------------------------------------------------------------- the ATIF parts
@dataclass(frozen=True)
class AgentInfo(Part):
    """The scaffold (agent id and version) and the model that answered most calls."""

    name: str = ""
    version: str = ""
    model_name: str | None = optional()
    extra: AgentExtra | None = optional()


@dataclass(frozen=True)
class ToolCall(Part):
    """One tool invocation of an agent step. `extra.kind` is the tool's kind (TOOL_KINDS),
    `extra.command` the shell command for a shell tool."""

    tool_call_id: str = ""
    function_name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    extra: CallExtra | None = optional()


@dataclass(frozen=True)
class ObservationResult(Part):
    """The result of one tool call (`source_call_id` names it), or environment feedback with no
    call (`source_call_id` null). `extra`: is_error, exit_code, truncated, source."""

    source_call_id: str | None = None
    content: str = ""
    extra: ResultExtra | None = optional()


@dataclass(frozen=True)
class Observation(Part):
    results: tuple[ObservationResult, ...] = ()


@dataclass(frozen=True)
class Metrics(Part):
    """One driver call's usage, as the gateway metered it. `extra`: input_tokens (uncached),
    cache_write_tokens."""

    prompt_tokens: int | None = optional()
    completion_tokens: int | None = optional()
    cached_tokens: int | None = optional()
    cost_usd: float | None = optional()
    extra: MetricsExtra | None = optional()


@dataclass(frozen=True)
class Step(Part):
    """A system prompt, a user message, or an agent turn (one driver call's answer: message,
    tool calls, and the observations the scaffold sent back with the next call). `extra`:
    call_seq (the driver_call's seq), thread, status, error, latency_ms, wire."""

    step_id: int = 0
    source: str = "agent"
    message: str = ""
    timestamp: str | None = optional()
    model_name: str | None = optional()
    reasoning_content: str | None = optional()
    tool_calls: tuple[ToolCall, ...] | None = optional()
    observation: Observation | None = optional()
    metrics: Metrics | None = optional()
    extra: StepExtra | None = optional()

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return self.tool_calls or ()

    @property
    def results(self) -> tuple[ObservationResult, ...]:
        return self.observation.results if self.observation else ()

    @property
    def details(self) -> StepExtra:
        return self.extra or StepExtra()


@dataclass(frozen=True)
class FinalMetrics(Part):
    """Totals over every driver call (the sum of the driver_call events). `extra`: calls,
    errors, input_tokens (uncached), cache_write_tokens, tokens (all four kinds, as the
    gateway's totals count them), models, budget_exhausted, tool_calls_by_kind and _by_name,
    threads."""

    total_prompt_tokens: int = 0
    total_completion_tokens: int = 0
    total_cached_tokens: int = 0
    total_cost_usd: float = 0.0
    total_steps: int = 0
    extra: FinalExtra | None = optional()


@dataclass(frozen=True)
class Trajectory(Part):
    """trajectory.json. `extra`: run_id, task, driver, wires, sources (what it was built from),
    warnings (what could not be read), a2c_version (of the builder)."""

    session_id: str = ""
    agent: AgentInfo = field(default_factory=AgentInfo)
    steps: tuple[Step, ...] = ()
    format: str = TRAJECTORY_FORMAT
    schema_version: str = ATIF_VERSION
    notes: str | None = optional()
    final_metrics: FinalMetrics | None = optional()
    extra: TrajectoryExtra | None = optional()


NESTED = (AgentInfo, ToolCall, ObservationResult, Observation, Metrics, Step, FinalMetrics)


def schema_body() -> dict[str, Any]:
    """The JSON Schema of trajectory.json (a2c.contracts.schemas writes it)."""
    from .schema_of import record_schema

    defs = {cls.__name__: record_schema(cls) for cls in NESTED}
    root = record_schema(Trajectory)
    root["properties"]["format"] = {"const": TRAJECTORY_FORMAT}
    root["properties"]["schema_version"] = {"type": "string", "pattern": "^ATIF-v1\\."}
    root["required"] = ["format", "schema_version", "session_id", "agent", "steps"]
    for schema in (root, *defs.values()):     # the extras stay open objects (see above)
        if "extra" in schema["properties"]:
            schema["properties"]["extra"] = {"type": ["object", "null"]}
    defs["Step"]["properties"]["source"] = {"enum": list(SOURCES)}
    defs["Step"]["properties"]["step_id"] = {"type": "integer", "minimum": 1}
    defs["Step"]["required"] = ["step_id", "source", "message"]
    defs["ToolCall"]["required"] = ["tool_call_id", "function_name", "arguments"]
    defs["ObservationResult"]["required"] = ["content"]
    defs["AgentInfo"]["required"] = ["name", "version"]
    for name in defs:
        defs[name]["additionalProperties"] = False
    root["additionalProperties"] = False
    return {**root, "$defs": defs}


def validate_trajectory(data: dict[str, Any]) -> list[str]:
    """Every way `data` departs from the schema ('path: message'), plus step ids that are not
    1, 2, 3...; empty when it validates."""
    import jsonschema

    from .schema_of import load_schema

    validator = jsonschema.Draft202012Validator(load_schema("trajectory"))
    problems = [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                for e in sorted(validator.iter_errors(data), key=lambda e: list(e.path))]
    steps = data.get("steps") if isinstance(data, dict) else None
    if isinstance(steps, list):
        ids = [s.get("step_id") for s in steps if isinstance(s, dict)]
        if ids != list(range(1, len(ids) + 1)):
            problems.append("steps: step_id must count 1, 2, 3... in order")
    return problems
