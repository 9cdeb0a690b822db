"""The level-3 workspace's `l3/env.json`, typed: the grader's environment as an agent reads it
(templates/task/workspace/l3/env.json.j2 writes it; the reference agents read it).

Why a record: three agents read the file key by key (kind, options, history, score_by,
inference), each picking the grader's `env` part out again before handing it to the
environments. Here it is parsed once: `env` is the grader's `RolloutEnvSpec` (what the rollout
config, the prompt format and the environment factory take), beside what only an agent needs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.spec import RolloutEnvSpec

# the keys of env.json that are the grader's `env` (the rest is the agent's: scoring, inference)
ENV_KEYS = ("kind", "max_steps", "n_episodes", "history", "options")


@dataclass(frozen=True)
class L3EnvFile:
    """`env` (kind, max_steps, history, options as the grader plays them), `score_by` (an
    item's score: "success" or "reward") and `inference` (the grader's generation settings)."""

    env: RolloutEnvSpec
    score_by: str = "success"
    inference: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> L3EnvFile:
        """A key the file leaves null takes the spec's default, as an absent one does."""
        env = RolloutEnvSpec.from_dict({k: data[k] for k in ENV_KEYS if data.get(k) is not None})
        return cls(env=env, score_by=str(data.get("score_by") or "success"),
                   inference=dict(data.get("inference") or {}))

    @classmethod
    def read(cls, path: Path) -> L3EnvFile:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
