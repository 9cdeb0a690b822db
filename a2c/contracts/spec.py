"""The resolved specs, typed: what the compiler writes under a manifest's kind key (bundle.json's
`task`, agent.json's `agent`, suite.json's `suite`) and the runtime and the analysis read.

`compiler/resolve.py` makes the dicts (defaults filled in, durations in seconds, every optional
key present, null when unset, except the few written only when declared: marked `when_set`
here); these classes read them (`TaskSpec.from_dict`) and write them back unchanged
(`to_dict`): a key the class does not know is kept in `extra`, a key the source lacked stays
absent, so a bundle's JSON, its spec hash and its digest never move. Each field's `doc` is the
description its JSON Schema (`a2c/contracts/schemas/bundle.schema.json`) gives.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

S = TypeVar("S", bound="SpecRecord")
DOC = "a2c_doc"
WHEN_SET = "a2c_when_set"      # written only when set (not None, not empty)


def doc(text: str, default: Any = None, *, factory: Any = None, when_set: bool = False) -> Any:
    """A field with its description (and `when_set`: left out of the JSON when None or empty,
    as the compiler leaves the key out)."""
    meta = {DOC: text, WHEN_SET: when_set}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class SpecRecord:
    """A part of a resolved spec: typed fields over the dict, `extra` for keys it does not know."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False,
                                  metadata={DOC: "keys this a2c does not know, kept as read"})

    @classmethod
    def fields_of(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if f.name != "extra"]

    @classmethod
    def from_dict(cls: type[S], data: dict[str, Any]) -> S:
        hints = typing.get_type_hints(cls)
        names = {f.name for f in cls.fields_of()}
        kwargs = {k: _convert(hints[k], v) for k, v in data.items() if k in names}
        obj = cls(**kwargs, extra={k: v for k, v in data.items() if k not in names})
        object.__setattr__(obj, "_absent", frozenset(names - set(data)))
        return obj

    def to_dict(self) -> dict[str, Any]:
        absent = getattr(self, "_absent", None)     # None: made here, not read
        out: dict[str, Any] = dict(self.extra)
        for f in self.fields_of():
            value = getattr(self, f.name)
            if absent is not None and f.name in absent and value == _default(f):
                continue
            if absent is None and f.metadata.get(WHEN_SET) and value in (None, {}, []):
                continue
            out[f.name] = _plain(value)
        return out


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def _spec_class(tp: Any) -> type[SpecRecord] | None:
    return tp if isinstance(tp, type) and issubclass(tp, SpecRecord) else None


def _convert(tp: Any, value: Any) -> Any:
    """A JSON value as the annotation `tp` wants it (nested specs built, the rest as is)."""
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if (cls := _spec_class(tp)) is not None:
        return cls.from_dict(value) if isinstance(value, dict) else value
    if origin is list and args and _spec_class(args[0]) and isinstance(value, list):
        return [_convert(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and _spec_class(args[1]) and isinstance(value, dict):
        return {k: _convert(args[1], v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, SpecRecord):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# ----------------------------------------------------------------------------- task
@dataclass
class BaseModelSpec(SpecRecord):
    """The model the agent starts from: one of `hub` (with `revision`), `path`, `builtin`."""

    hub: str | None = doc("a Hugging Face Hub repository", when_set=True)
    revision: str | None = doc("the Hub revision (main when the spec names none)", when_set=True)
    path: str | None = doc("a local folder, absolute", when_set=True)
    builtin: str | None = doc("a model a2c builds itself (runtime/models.py)", when_set=True)


@dataclass
class SplitSpec(SpecRecord):
    """One side of the data: a split of the source, and optionally a slice of it."""

    split: str = doc("the source's split name", "")
    slice: Any = doc("a slice of the split (null: all of it)")


@dataclass
class DataSpec(SpecRecord):
    """Where the task's records come from and which the agent and the grader get."""

    source: dict[str, Any] = doc("hub {hub, config, revision} | files {files, format} | "
                                 "package {package} | generator {generator, params, seed}",
                                 factory=dict)
    agent: SplitSpec = doc("the agent's training split", factory=SplitSpec)
    heldout: SplitSpec = doc("the grader's held-out split", factory=SplitSpec)
    fields: dict[str, str] = doc("the record's field names (prompt, answer, ...)", factory=dict)


@dataclass
class RolloutEnvSpec(SpecRecord):
    """A rollout grader's interactive environment (level 3, the grader's `env:`): episodes of
    at most `max_steps` steps. Not the agent's software (`SoftwareSpec`) nor a variable."""

    kind: str = doc("the environment (runtime/envs)", "")
    max_steps: int = doc("steps per episode", 50)
    n_episodes: int | None = doc("episodes to play (null: every held-out item)")
    history: dict[str, Any] = doc("{max_tokens, keep_first_turns}: what of an episode the "
                                  "model sees", factory=dict)
    options: dict[str, Any] = doc("the environment's own options", factory=dict)
    data_root: str | None = doc("the folder record paths resolve against (set by the runtime "
                                "for a run or an evaluation, never by the compiler)",
                                when_set=True)


@dataclass
class GraderSpec(SpecRecord):
    """How a submission is scored (runtime/graders): the kind, its parameters, the inference."""

    kind: str = doc("exact_match | humaneval | pairwise_judge | rollout", "")
    params: dict[str, Any] = doc("the grader's parameters, its defaults written out",
                                 factory=dict)
    inference: dict[str, Any] = doc("the inference engine and generation settings, "
                                    "a2c.contracts.inference DEFAULT_INFERENCE filled in",
                                    factory=dict)
    env: RolloutEnvSpec | None = doc("the rollout environment (null for the other graders)")


@dataclass
class BudgetSpec(SpecRecord):
    """What the agent may spend; the driver and sandbox limits appear only when the spec sets
    them."""

    wall_clock_s: float = doc("the agent's wall clock, seconds", 43200)
    gpus: int = doc("GPUs the agent gets", 1)
    max_submissions: int = doc("submissions the grader accepts", 30)
    min_interval_s: float = doc("seconds between two submissions", 0)
    eval_timeout_s: float = doc("seconds one evaluation may take", 3600)
    driver_tokens: int | None = doc("the driver model's tokens (unset: unlimited)", when_set=True)
    driver_cost_usd: float | None = doc("the driver model's cost, USD", when_set=True)
    driver_calls: int | None = doc("calls to the driver model", when_set=True)
    memory_mb: int | None = doc("the sandbox's memory limit", when_set=True)
    cpus: float | None = doc("the sandbox's CPU limit", when_set=True)
    pids: int | None = doc("the sandbox's process limit", when_set=True)
    disk_mb: int | None = doc("the agent's disk budget, MiB: its workspace, /tmp and home "
                              "together (unset: DEFAULT_DISK_MB, 200 GiB)", when_set=True)

    @property
    def disk_budget_mb(self) -> int:
        """The disk budget that holds: the task's, else DEFAULT_DISK_MB."""
        return int(self.disk_mb or DEFAULT_DISK_MB)


# A task that sets no `budget.disk` gets 200 GiB: room for a dozen bf16 checkpoints of an 8B model
# (16 GB each) or two trainer checkpoints with their optimizer states, while one agent cannot
# fill a node's disk. Not written into bundles (their digests stay); the runtime applies it.
DEFAULT_DISK_MB = 200 * 1024


@dataclass
class FinalSplitSpec(SpecRecord):
    """Held-out items kept from the agent's feedback, scored once at the end."""

    fraction: float = doc("the fraction of the held-out items kept back", 0.0)
    seed: int = doc("the seed of the draw", 0)


@dataclass
class ScoringSpec(SpecRecord):
    """Which submission counts."""

    policy: str = doc("best | last", "best")
    final: FinalSplitSpec | None = doc("a final split, when the task declares one",
                                       when_set=True)


@dataclass
class ServiceSpec(SpecRecord):
    """A process the task runs beside the agent (runtime/env_services), e.g. the WebShop server."""

    name: str = doc("the service's name", "")
    command: str = doc("its command line ({port} is filled in)", "")
    port: int = doc("the port it listens on", 0)
    health: str | None = doc("the path answering once it is up")
    startup_timeout_s: float = doc("seconds it may take to come up", 60)


@dataclass
class SoftwareSpec(SpecRecord):
    """The agent's software (the task's `environment:` key): the image, the Python packages,
    the services. Not a rollout environment (`RolloutEnvSpec`, the grader's `env:`)."""

    base_image: str = doc("the container image, pinned by digest", "")
    packages: list[str] = doc("pip requirements, sorted", factory=list)
    services: list[ServiceSpec] = doc("the task's services", factory=list)


@dataclass
class TaskSpec(SpecRecord):
    """A resolved task (bundle.json `task`; docs/contracts.md)."""

    id: str = doc("the task's id", "")
    title: str = doc("one line", "")
    level: int = doc("1 | 2 | 3", 1)
    description: str = doc("what the agent reads, Markdown", "")
    base_model: BaseModelSpec = doc("the starting model", factory=BaseModelSpec)
    data: DataSpec = doc("the records", factory=DataSpec)
    grader: GraderSpec = doc("the scoring", factory=GraderSpec)
    budget: BudgetSpec = doc("the agent's budget", factory=BudgetSpec)
    scoring: ScoringSpec = doc("which submission counts", factory=ScoringSpec)
    modes: list[str] = doc("the modes a run may use (a2c.modes)", factory=list)
    environment: SoftwareSpec = doc("the agent's software", factory=SoftwareSpec)


# ----------------------------------------------------------------------------- agent
@dataclass
class InstallSpec(SpecRecord):
    """What the agent's image installs: an LLM scaffold's pinned packages (`a2c agents install`)."""

    npm: list[str] = doc("npm packages", factory=list)
    pip: list[str] = doc("pip requirements", factory=list)
    commands: list[str] = doc("shell commands, in order", factory=list)
    check: str | None = doc("a command that succeeds once the install is there")


@dataclass
class LaunchSpec(SpecRecord):
    """How the agent starts: its command, environment, extra files, passed secrets."""

    command: str = doc("the launch command (launch.sh)", "")
    env: dict[str, Any] = doc("environment variables set for the agent", factory=dict)
    files: dict[str, Any] = doc("extra files written into the bundle, by path", factory=dict)
    pass_env: list[str] = doc("host variables passed through (redacted from the record)",
                              factory=list)


@dataclass
class DriverSpec(SpecRecord):
    """The LLM a scaffold drives (runtime/driver_gateway)."""

    required: bool = doc("whether a run must name a driver (the compiler writes true for "
                         "scaffolds; a hand-made agent that leaves it out needs none)", False)
    default: str | None = doc("the driver used when a run names none")
    wire: str | None = doc("the preferred wire (the first of `wires`)")
    wires: list[str] = doc("the wires the scaffold speaks, preferred first", factory=list)
    models: list[str] = doc("the driver models it is known to work with", factory=list)
    context_min: int | None = doc("the context (tokens) its calls need; a vllm/ driver's "
                                  "server is given at least this much", when_set=True)


@dataclass
class TranscriptSpec(SpecRecord):
    """Where the agent's transcript is and how it is written."""

    source: str = doc("stdout | file", "stdout")
    path: str | None = doc("the file, for source file")
    format: str = doc("text | json | jsonl | stream-json", "text")
    ext: str = doc("the extension of logs/transcript.<ext>", "log")
    native: Any = doc("the scaffold's own session log, when it keeps one")


@dataclass
class AgentSpec(SpecRecord):
    """A resolved agent (agent.json `agent`): a scaffold or a reference solution."""

    id: str = doc("the agent's id", "")
    title: str = doc("one line", "")
    type: str = doc("scaffold | reference", "")
    homepage: str | None = doc("the project's page")
    version: str | None = doc("the version installed")
    install: InstallSpec = doc("what its image installs", factory=InstallSpec)
    launch: LaunchSpec = doc("how it starts", factory=LaunchSpec)
    driver: DriverSpec = doc("the LLM it drives", factory=DriverSpec)
    prompt: str = doc("the prompt template (Jinja), rendered per run", "")
    transcript: TranscriptSpec = doc("its transcript", factory=TranscriptSpec)
    params: dict[str, Any] = doc("declared parameters: name -> {type, default, description, "
                                 "...} (absent when none)", factory=dict, when_set=True)


# ----------------------------------------------------------------------------- suite
@dataclass
class SuiteBudgetSpec(SpecRecord):
    """A suite's (or group's) budget overrides: only the keys it sets."""

    wall_clock_s: float | None = doc("the agent's wall clock, seconds", when_set=True)
    gpus: int | None = doc("GPUs per agent", when_set=True)
    cpus: float | None = doc("CPUs per agent", when_set=True)
    eval_cpus: float | None = doc("CPUs per grader", when_set=True)
    eval_gpus: float | None = doc("GPUs per grader", when_set=True)
    driver_tokens: int | None = doc("the driver model's tokens", when_set=True)
    driver_cost_usd: float | None = doc("the driver model's cost, USD", when_set=True)
    driver_calls: int | None = doc("calls to the driver model", when_set=True)


@dataclass
class SuiteGroupSpec(SpecRecord):
    """One group of a suite: the axes whose product (less `exclude`, plus `include`) it runs."""

    title: str | None = doc("the group's title")
    tasks: list[str] = doc("task ids", factory=list)
    agents: list[str] = doc("agent ids", factory=list)
    drivers: list[str] | dict[str, list[str]] = doc("driver models (by agent, as a mapping)",
                                                    factory=list)
    modes: list[str] = doc("modes", factory=list)
    seeds: list[int] = doc("seeds", factory=list)
    include: list[dict[str, Any]] = doc("trials added to the product", factory=list)
    exclude: list[dict[str, Any]] = doc("patterns removed from the product", factory=list)
    budget: SuiteBudgetSpec = doc("budget overrides", factory=SuiteBudgetSpec)
    base_model: Any = doc("a base model override (null: the task's)")
    backend: str = doc("the sandbox backend: local | docker", "local")
    agent_params: dict[str, dict[str, Any]] = doc("agent id -> parameter values",
                                                  factory=dict, when_set=True)


@dataclass
class SuiteSpec(SpecRecord):
    """A resolved suite (suite.json `suite`); `trials` is the expanded list the build adds."""

    id: str = doc("the suite's id", "")
    title: str = doc("one line", "")
    description: str | None = doc("what it is for")
    tasks: list[str] = doc("every task a group names", factory=list)
    agents: list[str] = doc("every agent a group names", factory=list)
    drivers: list[str] = doc("every driver a group names", factory=list)
    modes: list[str] = doc("every mode", factory=list)
    seeds: list[int] = doc("every seed", factory=list)
    budget: SuiteBudgetSpec = doc("budget overrides for every group", factory=SuiteBudgetSpec)
    groups: dict[str, SuiteGroupSpec] = doc("the groups by name", factory=dict)
    trials: list[dict[str, Any]] = doc("the trials (a2c.contracts.trial.Trial), with the "
                                       "bundles' digests", factory=list, when_set=True)


SPEC_CLASSES: dict[str, type[SpecRecord]] = {"Task": TaskSpec, "Agent": AgentSpec,
                                             "Suite": SuiteSpec}
