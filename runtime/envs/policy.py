"""The policy model in a rollout: how its inference engine is loaded and how its tokens are
counted, shared by the rollout grader, the workspace's rollout example and the level-3 reference
agents (so an agent generates exactly as it is scored).

Kept apart from the rollout grader (`rollout_grader.py`) so an agent uses these without the
grader's code in its sandbox view (runtime/sandbox/view.py).
"""

from __future__ import annotations

from collections.abc import Callable

PREFIX_CACHE_MB = 1024


def policy_engine_kwargs(options: dict) -> dict:
    """How the policy's inference engine is loaded for rollouts (grader, example script, benchmark
    alike): the weights dtype, and the prefix cache, so each step computes only the conversation's
    new tokens (transformers: `inference/prefix_cache.py`; vLLM: its automatic prefix caching)."""
    kwargs = {"prefix_cache_mb": int(options.get("prefix_cache_mb", PREFIX_CACHE_MB) or 0)}
    dtype = options.get("dtype")
    if dtype:
        kwargs["dtype"] = dtype
    return kwargs


def tokenizer_counter(tokenizer) -> Callable[[str], int]:
    """The history rule's token count: the policy's own tokens, without special tokens."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def token_counter(backend) -> Callable[[str], int] | None:
    tok = getattr(backend, "tokenizer", None)
    return None if tok is None else tokenizer_counter(tok)
