"""The grader registry: `grader.kind` -> grader class, the built-in kinds imported on first use.

`get_grader(task["grader"])` returns the grader for the task's `grader.kind`; `@register(kind)`
adds one (a class, or a factory taking the grader config).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from a2c.contracts.service_config import as_grader_spec
from a2c.contracts.spec import GraderSpec
from a2c.runtime.graders.base import Grader, GraderError

# kind -> "module:attribute"; modules are imported on first use (humaneval and the judge pull in
# nothing heavy, but rollout pulls in the L3 environments).
_LAZY: dict[str, str] = {
    "exact_match": "a2c.runtime.graders.exact_match:ExactMatchGrader",
    "humaneval": "a2c.runtime.graders.humaneval:HumanEvalGrader",
    "pairwise_judge": "a2c.runtime.graders.judge:PairwiseJudgeGrader",
    "rollout": "a2c.runtime.envs.rollout_grader:RolloutGrader",
}
_REGISTRY: dict[str, Callable[[GraderSpec], Grader]] = {}
GRADER_KINDS = tuple(_LAZY)


def register(kind: str) -> Callable:
    """Decorator: register a grader class (or factory taking the grader config) under `kind`."""

    def deco(factory):
        _REGISTRY[kind] = factory
        return factory

    return deco


def get_grader(grader_cfg: GraderSpec | dict[str, Any]) -> Grader:
    """The grader of `grader_cfg` (a `GraderSpec`, or a grader.json section, parsed here)."""
    spec = as_grader_spec(grader_cfg)
    kind = spec.kind or None
    if kind not in _REGISTRY:
        target = _LAZY.get(kind)
        if target is None:
            known = sorted(set(_REGISTRY) | set(_LAZY))
            raise GraderError(f"unknown grader kind {kind!r} (known: {', '.join(known)})")
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise GraderError(f"grader kind {kind!r} needs {module_name}, which is not "
                                  f"installed in this checkout") from None
            raise
        if kind not in _REGISTRY:  # the module may register itself; else take the attribute
            _REGISTRY[kind] = getattr(module, attr)
    return _REGISTRY[kind](spec)
