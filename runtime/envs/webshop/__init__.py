"""The `webshop` environment kind: `kind` (its EnvKind), `env` (the HTTP adapter, its prompt
format, the agent gateway's path rule), `data` (the `webshop` generator: session ids)."""

from a2c.runtime.envs.webshop.kind import WebShopKind

__all__ = ["WebShopKind"]
