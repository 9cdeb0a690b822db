"""The `alfworld` environment kind: `kind` (its EnvKind), `env` (engines, the adapter, the ReAct
prompt format), `fewshot` (the project's ReAct examples), `data` (the `alfworld` generator)."""

from a2c.runtime.envs.alfworld.kind import AlfWorldKind

__all__ = ["AlfWorldKind"]
