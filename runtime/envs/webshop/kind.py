"""The `webshop` environment kind: WebShop sessions over its HTTP protocol (`env.py`), the server
running as an environment service the task declares; the `webshop` data generator (`data.py`)
names the sessions of each split. An item scores the WebShop reward; the agent's proxy passes
only the sessions of its split (`agent_path_filter`)."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.spec import RolloutEnvSpec
from a2c.runtime.envs.registry import EnvKind, env_kind


@env_kind
class WebShopKind(EnvKind):
    name = "webshop"
    score_key = "reward"
    generator = "webshop"

    def env_factory(self, env: RolloutEnvSpec, data_root: Path):
        from a2c.runtime.envs.webshop.env import WebShopEnv

        options = dict(env.options or {})
        return lambda rec: WebShopEnv(rec, options)

    def prompt_format(self):
        from a2c.runtime.envs.webshop.env import WebShopFormat
        return WebShopFormat

    def data_generator(self):
        from a2c.runtime.envs.webshop.data import sessions
        return sessions

    def agent_path_filter(self):
        from a2c.runtime.envs.webshop.env import agent_path_filter
        return agent_path_filter
