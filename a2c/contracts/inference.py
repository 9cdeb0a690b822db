"""The inference defaults: one definition for the compiler and the runtime (stdlib only).

`DEFAULT_INFERENCE` is what a grader's `inference` block holds when the spec leaves a key out:
the compiler writes it into every resolved spec (`compiler/resolve.py`), and a grader fills the
same keys for a hand-written grader config (`runtime/graders/base.py`).

`GenerationSettings` (`a2c.runtime.inference.settings`) takes its field defaults from here too,
with one exception kept as it was: a backend called with settings built from nothing
(`GenerationSettings()`, `from_config({})`) generates at most `BARE_MAX_NEW_TOKENS` = 256 tokens,
not the spec default of 512. Graders always pass a complete `inference` block, so they get 512.
"""

from __future__ import annotations

from typing import Any

DEFAULT_INFERENCE: dict[str, Any] = {
    "backend": "auto", "max_new_tokens": 512, "temperature": 0.0, "top_p": 1.0, "stop": [],
    "batch_size": 32, "chat_template": "auto", "n_samples": 1, "seed": 0,
    "prompt_template": "{prompt}",
}

# max_new_tokens of settings given no value at all (see the module doc).
BARE_MAX_NEW_TOKENS = 256

__all__ = ["BARE_MAX_NEW_TOKENS", "DEFAULT_INFERENCE"]
