"""The level-3 environments as an agent plays them: the evaluation's prompt format, the
environment factory and the rollout loop, the very code the grader's rollouts run (so an agent
trains on exactly the format it is scored in).

The one place the agents import `a2c.runtime.envs` (docs/architecture.md's dependency rule).
"""

from __future__ import annotations

from a2c.runtime.envs.prompts import Turn, get_format
from a2c.runtime.envs.registry import env_factory, factory_for
from a2c.runtime.envs.rollout import RolloutConfig, run_rollouts

__all__ = ["RolloutConfig", "Turn", "env_factory", "factory_for", "get_format", "run_rollouts"]
