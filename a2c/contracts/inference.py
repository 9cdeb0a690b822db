"""The inference defaults: one definition for the compiler and the runtime (stdlib only).

`DEFAULT_INFERENCE` is what a grader's `inference` block holds when the spec leaves a key out:
the compiler writes it into every resolved spec (`compiler/resolve.py`), and a grader fills the
same keys for a hand-written grader config (`runtime/graders/base.py`).

`GenerationSettings` (`a2c.runtime.inference.settings`) takes its field defaults from here too,
with one exception kept as it was: an engine called with settings built from nothing
(`GenerationSettings()`, `from_config({})`) generates at most `BARE_MAX_NEW_TOKENS` = 256 tokens,
not the spec default of 512. Graders always pass a complete `inference` block, so they get 512.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .parts import Part


@dataclass(frozen=True)
class InferenceBlock(Part):
    """A grader's `inference` block, typed: each key with the value it takes when the spec
    leaves it out."""

    engine: str = "auto"           # the inference engine: auto | transformers | vllm
    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    batch_size: int = 32
    chat_template: Any = "auto"     # "auto" | True | False
    n_samples: int = 1
    seed: int = 0
    prompt_template: str = "{prompt}"

    @classmethod
    def of(cls, raw: dict[str, Any] | None) -> InferenceBlock:
        """The block a grader config holds (None: all defaults; an older `backend` key read as
        `engine`)."""
        return cls.from_dict(inference_block(raw))


INFERENCE_DEFAULTS = InferenceBlock()
# the same, as the block the compiler writes into a resolved spec
DEFAULT_INFERENCE: dict[str, Any] = INFERENCE_DEFAULTS.to_dict()

# max_new_tokens of settings given no value at all (see the module doc).
BARE_MAX_NEW_TOKENS = 256

# A task spec written before `engine` had its name said `inference.backend`: the compiler maps
# it (compiler/renamed.py) and so does `inference_block` for a grader config built by an older a2c.
LEGACY_ENGINE_KEY = "backend"


def inference_block(raw: dict[str, Any] | None) -> dict[str, Any]:
    """A grader's `inference` block as a grader reads it: DEFAULT_INFERENCE filled in, and the
    engine under its name even where an older bundle wrote it as `backend`."""
    block = dict(raw or {})
    if LEGACY_ENGINE_KEY in block:
        legacy = block.pop(LEGACY_ENGINE_KEY)
        block.setdefault("engine", legacy)
    return {**DEFAULT_INFERENCE, **block}

__all__ = ["BARE_MAX_NEW_TOKENS", "DEFAULT_INFERENCE", "INFERENCE_DEFAULTS", "LEGACY_ENGINE_KEY",
           "InferenceBlock", "inference_block"]
