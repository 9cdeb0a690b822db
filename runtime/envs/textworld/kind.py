"""The `textworld` environment kind: TextWorld games made offline from a seed (`games.py`),
played by the real TextWorld engine (`env.py`); an item scores 1 when the game is won."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.spec import RolloutEnvSpec
from a2c.runtime.envs.registry import EnvKind, env_kind, resolve_path


@env_kind
class TextWorldKind(EnvKind):
    name = "textworld"
    score_key = "success"
    generator = "textworld"

    def env_factory(self, env: RolloutEnvSpec, data_root: Path):
        from a2c.runtime.envs.textworld.env import TextWorldEnv

        max_steps = int(env.max_steps)
        return lambda rec: TextWorldEnv(resolve_path(data_root, rec["game_file"]),
                                        max_steps=max_steps)

    def prompt_format(self):
        from a2c.runtime.envs.textworld.env import TextWorldFormat
        return TextWorldFormat

    def data_generator(self):
        from a2c.runtime.envs.textworld.games import generate
        return generate
