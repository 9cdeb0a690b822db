"""Loading an inference engine (transformers or vLLM, chosen by `resolve_kind`) and generating for records."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from .settings import GenerationSettings, InferenceError, Prompt

KINDS = ("auto", "transformers", "vllm")


@runtime_checkable
class InferenceEngine(Protocol):
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
        raise InferenceError(f"unknown inference engine {kind!r}; known: {', '.join(KINDS)}")
    if kind == "auto":
        return "vllm" if (cuda_available() and vllm_installed()) else "transformers"
    return kind


def load_engine(model_path: str | Path, kind: str = "auto", **kwargs) -> InferenceEngine:
    """Load `model_path` (a save_pretrained folder) on the inference engine `kind`.

    `chat_template=` (a template string, named templates, or None for none) replaces the
    folder's own chat template: the grader passes the base model's (chat_template.py)."""
    resolved = resolve_kind(kind)
    path = Path(model_path)
    if not (path / "config.json").is_file():
        raise InferenceError(f"{path} is not a model folder (no config.json)")
    if resolved == "vllm":
        from .vllm_engine import VLLMEngine
        return VLLMEngine(path, **kwargs)
    from .transformers_engine import TransformersEngine
    return TransformersEngine(path, **kwargs)


def render_prompt(template: str | None, record: dict) -> str:
    """The grader's `prompt_template` (Python str.format over the record's fields)."""
    if not template:
        return record["prompt"]
    try:
        return template.format(**record)
    except (KeyError, IndexError, ValueError) as exc:
        raise InferenceError(f"prompt_template {template!r} cannot be filled from record "
                             f"{record.get('id')!r}: {type(exc).__name__}: {exc}") from None


def generate_records(backend: InferenceEngine, records: Sequence[dict], settings: GenerationSettings,
                     prompt_template: str | None = None) -> list[dict]:
    """Generate for records: [{"id", "prompt", "output", "backend"}] in record order."""
    prompts = [render_prompt(prompt_template, r) for r in records]
    outputs = backend.generate(prompts, settings)
    return [{"id": r["id"], "prompt": p, "output": o, "backend": backend.name}
            for r, p, o in zip(records, prompts, outputs)]
