"""The `webshop` environment kind: `kind` (its EnvKind), `env` (the HTTP adapter, its prompt
format, the agent proxy's path rule), `data` (the `webshop` generator: session ids)."""

from a2c.runtime.envs.webshop.kind import WebShopKind

__all__ = ["WebShopKind"]
