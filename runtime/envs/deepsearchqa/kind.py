"""The `deepsearchqa` environment kind: a ReAct loop over a search tool (`env.py`, `search.py`),
answers scored as the benchmark does (`scoring.py`); the `deepsearchqa` data generator
(`data.py`) reads the questions and copies the frozen corpus (`corpus.py` builds one). An item
scores its answer's reward (F1)."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.spec import RolloutEnvSpec
from a2c.runtime.envs.registry import EnvKind, env_kind


@env_kind
class DeepSearchQAKind(EnvKind):
    name = "deepsearchqa"
    score_key = "reward"
    generator = "deepsearchqa"

    def env_factory(self, env: RolloutEnvSpec, data_root: Path):
        from a2c.runtime.envs.deepsearchqa.env import DeepSearchQAEnv
        from a2c.runtime.envs.deepsearchqa.search import make_search

        options = dict(env.options or {})
        searcher = make_search(options, data_root)
        return lambda rec: DeepSearchQAEnv(rec, searcher, options)

    def prompt_format(self):
        from a2c.runtime.envs.deepsearchqa.env import DeepSearchQAFormat
        return DeepSearchQAFormat

    def data_generator(self):
        from a2c.runtime.envs.deepsearchqa.data import generate
        return generate
