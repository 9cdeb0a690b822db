"""Inference for an agent's own policy: the runtime's inference engines with the grader's settings
for a level-3 rollout (engine options, token counting), so the agent generates as it is scored.

Imported lazily by the agents (it loads the inference engines); the one place the agents import
`a2c.runtime.inference` and `a2c.runtime.envs.policy` (the rollout grader's policy settings, kept
apart from the grader so that its code stays out of the agent's sandbox view).
"""

from __future__ import annotations

from a2c.runtime.envs.policy import policy_engine_kwargs, token_counter, tokenizer_counter
from a2c.runtime.inference import GenerationSettings, load_engine

__all__ = ["GenerationSettings", "load_engine", "policy_engine_kwargs", "token_counter",
           "tokenizer_counter"]
