"""What a level-3 environment's reply says, typed: an `Env`'s `reset()`/`step()` `info` as the
rollout loop, the prompt formats and the reference agents read it.

Why a record: the same `info` dict was read key by key in the rollout loop (task, won, final
reward, max score), the prompt formats (the listed valid actions) and three agents (task, won, the
valid actions), each with its own default. On the wire an `info` stays the dict the environment
returns (the `Env` protocol is what a workspace script plays: runtime/envs/base.py), with its
kind's own extra keys; a reader parses it here once and uses attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepInfo:
    """The keys every kind may give: `task` (the goal shown to the policy, on reset), `won`
    (once the episode ends), `admissible_commands` (the valid actions the environment lists, in
    its order), `final_reward` (the episode's score, where the kind computes one at the end:
    WebShop, DeepSearchQA) and `max_score` (TextWorld: the step rewards' sum is divided by it)."""

    task: str = ""
    won: bool = False
    admissible_commands: tuple[str, ...] = ()
    final_reward: float | None = None
    max_score: float | None = None

    @classmethod
    def from_dict(cls, info: Mapping[str, Any] | None) -> StepInfo:
        """An environment's `info` (None: an empty one); unknown keys are the kind's own."""
        info = info or {}
        final, most = info.get("final_reward"), info.get("max_score")
        return cls(task=str(info.get("task") or ""), won=bool(info.get("won")),
                   admissible_commands=tuple(info.get("admissible_commands") or ()),
                   final_reward=None if final is None else float(final),
                   max_score=float(most) if most else None)
