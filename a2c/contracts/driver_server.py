"""The vLLM server a2c starts for a `--driver vllm/MODEL` run, as typed records: what it will be
(`ServerPlan`, gateway.json's `server`, decided at prepare so a resume starts the same server),
what came up (`ServerInfo`), a shared server's state file (`SharedServerState`, server.json)
and what run.json and run_started say of it (`DriverServerRecord`, run.json's `driver_server`).

Each file is parsed into its record where it is read, and the run uses attributes from there
on; the JSON each writes is the one the files always held (records are signed, and an older
run's must still read). The drivers file's `vllm` section, which the plan is made from, is
`VllmSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .parts import Part
from .records import optional

SAMPLING_NOTE = ("a request's own fields win over the defaults; each forwarded body is in "
              "driver/blobs")


@dataclass(frozen=True)
class Weights(Part):
    """The driver's weights by digest (`models.model_fingerprint`, as the base model's); a hub
    id vLLM fetches itself has none, and a note says so."""

    fingerprint: str | None = None
    note: str | None = optional()


@dataclass(frozen=True)
class ContextFit(Part):
    """What the plan says of the served context (runtime/run/driver_plan.py `fit_context`): the
    model's trained length, the scaffold's need, whether a2c stretched the model to it, who set
    `--max-model-len` and why, where that matters."""

    trained: int | None = None
    needed: int | None = None
    needed_by: str | None = None
    stretched: bool = False
    set_by: str | None = optional()
    why: str | None = optional()


@dataclass(frozen=True)
class ServerPlan(Part):
    """gateway.json's `server`: the model, its served name, family, parser and template, the
    executable and how it is launched, the driver's GPUs, the seed, the flags, the weights, the
    sampling defaults the server applies, the context, the startup timeout; `share`: the folder
    of a server the node's runs share (runtime/run/driver_share.py)."""

    # what makes two runs' servers the same server (a2c's own choices and the operator's flags)
    IDENTITY: ClassVar[tuple[str, ...]] = ("executable", "launch", "model", "served_model_name",
                                           "args", "gpus", "seed", "weights", "chat_template")

    kind: str = "vllm"
    ref: str = ""
    model: str = ""
    folder: str | None = None
    served_model_name: str = ""
    family: str | None = None
    tool_call_parser: str | None = None
    chat_template: str | None = None
    executable: str = ""
    launch: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    seed: int = 0
    args: tuple[str, ...] = ()
    weights: Weights = field(default_factory=Weights)
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    context: ContextFit | None = None
    startup_timeout_s: float | None = None
    share: str | None = optional()

    def identity(self) -> dict[str, Any]:
        """The fields that make the server what it is, as the JSON holds them (a share's key)."""
        whole = self.to_dict()
        return {name: whole.get(name) for name in self.IDENTITY}


@dataclass(frozen=True)
class ServerInfo(Part):
    """What a started server said of itself: its URL and pid, vLLM's version, the flags after
    the executable, the context it serves (`max_model_len`, /v1/models)."""

    url: str | None = None
    pid: int | None = None
    version: str | None = None
    argv: tuple[str, ...] = ()
    max_model_len: int | None = None


@dataclass(frozen=True)
class SharedServerState(Part):
    """A shared server's server.json: its pid and the pid's start time (a recycled pid is never
    signalled), URL, what it said of itself, the run that started it, the share key, its plan;
    `started_it`: whether this run started it (this run's view, not in the file)."""


    pid: int = 0
    started: str | None = None
    url: str | None = None
    info: ServerInfo = field(default_factory=ServerInfo)
    started_by: str | None = None
    key: str | None = None
    plan: ServerPlan | None = None
    started_it: bool | None = optional()


@dataclass(frozen=True)
class ShareRecord(Part):
    """Whether the server was this run's own or shared: its key, the run that started it."""

    key: str | None = None
    started_by: str | None = None
    started_by_this_run: bool = False


@dataclass(frozen=True)
class Sampling(Part):
    """The sampling in force: the server's seed and the defaults it applies."""

    seed: int | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    note: str = SAMPLING_NOTE


@dataclass(frozen=True)
class DriverServerRecord(Part):
    """run.json's (and run_started's) `driver_server`: what ran (the weights' digest, the
    server's version and flags, the served context) and the sampling in force."""


    kind: str | None = None
    model: str | None = None
    served_model_name: str | None = None
    family: str | None = None
    tool_call_parser: str | None = None
    chat_template: str | None = None
    weights: Weights | None = None
    version: str | None = None
    argv: tuple[str, ...] | None = None
    max_model_len: int | None = None
    context: ContextFit | None = None
    gpus: tuple[str, ...] | None = None
    shared: ShareRecord | None = None
    sampling: Sampling = field(default_factory=Sampling)

    @classmethod
    def of(cls, plan: ServerPlan, info: ServerInfo | None,
           shared: ShareRecord | None) -> DriverServerRecord:
        """The record of a planned server: `info` once it came up (None: it said nothing)."""
        return cls(kind=plan.kind, model=plan.ref, served_model_name=plan.served_model_name,
                   family=plan.family, tool_call_parser=plan.tool_call_parser,
                   chat_template=plan.chat_template, weights=plan.weights,
                   version=info.version if info else None, argv=info.argv if info else None,
                   max_model_len=info.max_model_len if info else None,
                   context=plan.context, gpus=plan.gpus, shared=shared,
                   sampling=Sampling(seed=plan.seed, defaults=plan.sampling_defaults))

    @property
    def fingerprint(self) -> str | None:
        """The digest of the weights that drove the agent (None for a hub id)."""
        return self.weights.fingerprint if self.weights else None


@dataclass(frozen=True)
class VllmModel(Part):
    """The drivers file's `vllm.models.<name>`: a model's parser, template and extra flags."""

    tool_call_parser: str | None = None
    chat_template: str | None = None
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class VllmSettings(Part):
    """The drivers file's `vllm` section (drivers.schema.json): the executable, the startup
    timeout, the flags every server gets, per-model overrides."""

    executable: str | None = None
    startup_timeout_s: float | None = None
    args: tuple[str, ...] = ()
    models: dict[str, VllmModel] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VllmSettings:
        plain = super().from_dict(data)
        models = {name: VllmModel.from_dict(entry or {})
                  for name, entry in (data.get("models") or {}).items()}
        return cls(executable=plain.executable, startup_timeout_s=plain.startup_timeout_s,
                   args=tuple(plain.args or ()), models=models)

    def model(self, *names: str) -> VllmModel:
        """The first override naming one of `names` (the ref, then the served name)."""
        return next((self.models[n] for n in names if n in self.models), VllmModel())
