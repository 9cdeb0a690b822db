"""Inference backends behind one interface: transformers (CPU/GPU, batched) and vLLM (offline engine).

```python
settings = GenerationSettings.from_config(grader_cfg["inference"])
backend = load_backend(model_path, kind="auto")          # "auto" | "transformers" | "vllm"
outputs = backend.generate(prompts, settings)            # one string per prompt, input order
samples = backend.sample(prompts, settings, n=5)         # n strings per prompt
backend.name                                             # goes into every result
backend.close()
```
A prompt is a user-message string or a list of chat messages (`{"role", "content"}`). Both
backends build the model input the same way (`prompts.build_prompt_ids`): the chat template is
applied when the model has one (unless `chat_template: false`), then the text is tokenized once
by the model's tokenizer; vLLM receives those token ids, so both see identical inputs. Outputs are
the generated text only (special tokens skipped), cut at the first stop sequence.

Decoding: greedy when `temperature == 0` (with `n > 1` the greedy output is repeated n times);
sampling with `temperature`, `top_p` and `seed` otherwise. The model's own generation_config
defaults (repetition penalty, default sampling) are ignored on both backends.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from a2c.errors import A2CError

Prompt = str | list
KINDS = ("auto", "transformers", "vllm")


class InferenceError(A2CError):
    """A backend cannot be loaded or asked to generate as configured."""


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    batch_size: int = 32
    chat_template: Any = "auto"          # "auto" | True | False
    seed: int = 0
    n_samples: int = 1
    extra: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

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
        """From a grader's `inference` block; unknown keys (backend, prompt_template) go to extra."""
        cfg = dict(cfg or {})
        known = {f.name for f in fields(cls)} - {"extra"}
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


@runtime_checkable
class Backend(Protocol):
    name: str

    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings) -> list[str]: ...

    def sample(self, prompts: Sequence[Prompt], settings: GenerationSettings,
               n: int) -> list[list[str]]: ...

    def close(self) -> None: ...


def cuda_available() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def resolve_kind(kind: str = "auto") -> str:
    """'auto' -> 'vllm' when a CUDA GPU and vllm are present, else 'transformers'."""
    if kind not in KINDS:
        raise InferenceError(f"unknown inference backend {kind!r}; known: {', '.join(KINDS)}")
    if kind == "auto":
        return "vllm" if (cuda_available() and vllm_installed()) else "transformers"
    return kind


def load_backend(model_path: str | Path, kind: str = "auto", **kwargs) -> Backend:
    """Load `model_path` (a save_pretrained folder) on the backend `kind`."""
    resolved = resolve_kind(kind)
    path = Path(model_path)
    if not (path / "config.json").is_file():
        raise InferenceError(f"{path} is not a model folder (no config.json)")
    if resolved == "vllm":
        from .vllm_backend import VLLMBackend
        return VLLMBackend(path, **kwargs)
    from .transformers_backend import TransformersBackend
    return TransformersBackend(path, **kwargs)


def render_prompt(template: str | None, record: dict) -> str:
    """The grader's `prompt_template` (Python str.format over the record's fields)."""
    if not template:
        return record["prompt"]
    try:
        return template.format(**record)
    except (KeyError, IndexError, ValueError) as exc:
        raise InferenceError(f"prompt_template {template!r} cannot be filled from record "
                             f"{record.get('id')!r}: {type(exc).__name__}: {exc}") from None


def generate_records(backend: Backend, records: Sequence[dict], settings: GenerationSettings,
                     prompt_template: str | None = None) -> list[dict]:
    """Generate for records: [{"id", "prompt", "output", "backend"}] in record order."""
    prompts = [render_prompt(prompt_template, r) for r in records]
    outputs = backend.generate(prompts, settings)
    return [{"id": r["id"], "prompt": p, "output": o, "backend": backend.name}
            for r, p, o in zip(records, prompts, outputs)]


__all__ = [
    "Backend",
    "GenerationSettings",
    "InferenceError",
    "cuda_available",
    "generate_records",
    "load_backend",
    "render_prompt",
    "resolve_kind",
    "vllm_installed",
]
