"""The `deepsearchqa` environment kind: `kind` (its EnvKind), `env` (the episode and its prompt
format), `search` (BM25 over the frozen corpus, SearxNG), `documents` (a corpus line, a SearxNG
result), `scoring` (F1, set matching, the LLM judge), `data` (the `deepsearchqa` generator),
`corpus` (building the frozen corpus).

The package re-exports the names its tests and callers use, lazily (looking the kind up imports
only `kind.py`)."""

from __future__ import annotations

import importlib

from a2c.runtime.envs.deepsearchqa.kind import DeepSearchQAKind

_EXPORTS = {
    "BadAction": "a2c.runtime.envs.base", "EnvCrash": "a2c.runtime.envs.base",
    **dict.fromkeys(("generate", "read_questions", "split_questions"), f"{__name__}.data"),
    **dict.fromkeys(("DeepSearchQAEnv", "DeepSearchQAFormat"), f"{__name__}.env"),
    **dict.fromkeys(("AnswerScore", "exact_match", "is_set_answer", "judge_score", "normalize_answer",
                     "score_answer", "score_set", "split_set", "token_f1"), f"{__name__}.scoring"),
    **dict.fromkeys(("Document", "WebResult"), f"{__name__}.documents"),
    **dict.fromkeys(("CorpusSearch", "PurePythonBM25", "Searchers", "SearxngSearch",
                     "make_search", "tokenize"), f"{__name__}.search"),
}
__all__ = ["DeepSearchQAKind", *sorted(_EXPORTS)]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
