"""The `textworld` environment kind: `kind` (its EnvKind), `env` (the adapter and its prompt
format), `games` (the `textworld` data generator)."""

from a2c.runtime.envs.textworld.kind import TextWorldKind

__all__ = ["TextWorldKind"]
