"""Generation settings: what a grader's `inference` block asks of an inference engine, checked once.

Field defaults come from `a2c.contracts.inference` (the compiler's defaults too); see there for
the one that differs when settings are built from nothing (`max_new_tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from a2c.contracts.inference import BARE_MAX_NEW_TOKENS, INFERENCE_DEFAULTS
from a2c.errors import A2CError

Prompt = str | list
_D = INFERENCE_DEFAULTS


class InferenceError(A2CError):
    """An inference engine cannot be loaded or asked to generate as configured."""


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = BARE_MAX_NEW_TOKENS   # a grader passes the spec's value (512 default)
    temperature: float = _D.temperature
    top_p: float = _D.top_p
    stop: tuple[str, ...] = _D.stop
    batch_size: int = _D.batch_size
    chat_template: Any = _D.chat_template   # "auto" | True | False
    seed: int = _D.seed
    n_samples: int = _D.n_samples
    extra: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    # The grader's answer rule (answer_stop.AnswerStop): a sequence whose answer it finds decided
    # stops generating. Set by a grader in code (never from a spec); engines without it ignore it.
    answer_stop: Any = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self):
        if self.max_new_tokens < 1:
            raise InferenceError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise InferenceError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise InferenceError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.batch_size < 1 or self.n_samples < 1:
            raise InferenceError("batch_size and n_samples must be >= 1")
        if self.chat_template not in ("auto", True, False):
            raise InferenceError(f"chat_template must be auto, true or false, "
                                 f"got {self.chat_template!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @classmethod
    def from_config(cls, cfg: dict | None) -> GenerationSettings:
        """From a grader's `inference` block; unknown keys (engine, prompt_template) go to extra."""
        cfg = dict(cfg or {})
        known = {f.name for f in fields(cls)} - {"extra", "answer_stop"}
        kwargs = {k: cfg.pop(k) for k in list(cfg) if k in known and cfg[k] is not None}
        if "stop" in kwargs:
            stop = kwargs["stop"]
            kwargs["stop"] = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
        if "chat_template" in kwargs:
            value = kwargs["chat_template"]
            if isinstance(value, str) and value.lower() in ("true", "false", "auto"):
                value = {"true": True, "false": False, "auto": "auto"}[value.lower()]
            kwargs["chat_template"] = value
        for name, cast in (("max_new_tokens", int), ("batch_size", int), ("seed", int),
                           ("n_samples", int), ("temperature", float), ("top_p", float)):
            if name in kwargs:
                kwargs[name] = cast(kwargs[name])
        return cls(**kwargs, extra=cfg)

    def to_dict(self) -> dict:
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature,
                "top_p": self.top_p, "stop": list(self.stop), "batch_size": self.batch_size,
                "chat_template": self.chat_template, "seed": self.seed,
                "n_samples": self.n_samples}
