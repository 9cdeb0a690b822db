"""driver/gateway.json read as typed records, once, where a run's gateway, its analysis session
and its process starter read it: `GatewayConfig.read(run_dir)`.

config.py resolves and writes the file (`prepare_gateway`); this is its reading side, parsed
at the boundary so the gateway uses attributes. A field a file does not hold takes its default
here; keys this reader does not know are kept out (the file stays config.py's).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .config import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, read_config


@dataclass(frozen=True)
class UpstreamConfig:
    """Where the gateway forwards: `base_url` (None until a started server listens), the
    *name* of the provider key variable, the key header style (None: the wire's own), the
    served context (an int, `ask`, or None: no clamp, context.py) and the timeouts."""

    base_url: str | None = None
    key_env: str | None = None
    auth: str | None = None
    context: int | str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S


@dataclass(frozen=True)
class GatewayConfig:
    """gateway.json: the driver string, the pinned model and the ids a request may name
    (`models`), the wires served and the agent's (`agent_wire`), the upstream, the scripted
    driver's script (a `scripted:` driver), the budget and price entry (the ledger's), the
    socket."""

    driver: str = ""
    model: str = ""
    wires: tuple[str, ...] = ()
    agent_wire: str | None = None
    models: tuple[str, ...] = ()
    allow_models: tuple[str, ...] = ()
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    script: str | None = None            # the scripted driver's script file
    socket: str | None = None
    budget: dict[str, Any] = field(default_factory=dict)   # driver_tokens, _cost_usd, _calls
    price: dict[str, Any] | None = None                    # the model's price entry

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GatewayConfig:
        up = data.get("upstream") or {}
        known = {f.name for f in fields(UpstreamConfig)}
        scripted = data.get("scripted") or {}
        return cls(driver=data.get("driver") or "", model=data.get("model") or "",
                   wires=tuple(data.get("wires") or ()), agent_wire=data.get("agent_wire"),
                   models=tuple(data.get("models") or ()),
                   allow_models=tuple(data.get("allow_models") or ()),
                   upstream=UpstreamConfig(**{k: v for k, v in up.items()
                                              if k in known and v is not None}),
                   script=scripted.get("script"), socket=data.get("socket"),
                   budget=data.get("budget") or {}, price=data.get("price"))

    @classmethod
    def read(cls, run_dir: str | Path) -> GatewayConfig:
        return cls.from_dict(read_config(run_dir))

    @property
    def allowed(self) -> list[str]:
        """The model ids a request may name, exactly (the pinned list, else the model and its
        allowed ones)."""
        return list(dict.fromkeys(self.models or (self.model, *self.allow_models)))
