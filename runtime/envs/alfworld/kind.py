"""The `alfworld` environment kind: ALFWorld's text games (`env.py`, the TextWorld PDDL engine or
a registered one) with the ReAct prompt; the `alfworld` data generator (`data.py`) lists fetched
games into records. An item scores 1 when the game is won."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.spec import RolloutEnvSpec
from a2c.runtime.envs.registry import EnvKind, env_kind, resolve_path


@env_kind
class AlfWorldKind(EnvKind):
    name = "alfworld"
    score_key = "success"
    generator = "alfworld"

    def env_factory(self, env: RolloutEnvSpec, data_root: Path):
        from a2c.runtime.envs.alfworld.env import AlfWorldEnv

        options = dict(env.options or {})
        return lambda rec: AlfWorldEnv(resolve_path(data_root, rec["game_file"]), options)

    def prompt_format(self):
        from a2c.runtime.envs.alfworld.env import AlfWorldFormat
        return AlfWorldFormat

    def data_generator(self):
        from a2c.runtime.envs.alfworld.data import generate
        return generate
