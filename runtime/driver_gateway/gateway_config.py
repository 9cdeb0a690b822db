"""driver/gateway.json read as typed records, once, where a run's gateway, its analysis session,
its process starter and the run itself read it: `GatewayConfig.read(run_dir)`.

config.py resolves and writes the file (`prepare_gateway`); this is its reading side, parsed
at the boundary so the gateway uses attributes. A field a file does not hold takes its default
here; keys this reader does not know are kept out (the file stays config.py's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from a2c.contracts.driver_server import ServerPlan
from a2c.contracts.parts import Part

from .config import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, read_config
from .prices import Price


@dataclass(frozen=True)
class UpstreamConfig(Part):
    """Where the gateway forwards: `base_url` (None until a started server listens), the
    *name* of the provider key variable, the key header style (None: the wire's own), the
    served context (an int, `ask`, or None: no clamp, context.py) and the timeouts."""

    base_url: str | None = None
    key_env: str | None = None
    auth: str | None = None
    context: int | str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S

    @property
    def stated_context(self) -> int | None:
        """The context the provider states as a number (None: none, or `ask`)."""
        value = self.context
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
            else None


@dataclass(frozen=True)
class ScriptedDriver(Part):
    """A `scripted:NAME` driver's script: its name, file and digest."""

    name: str | None = None
    script: str | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class DriverLimits(Part):
    """gateway.json's `budget`: the run's driver limits (a2c/contracts/budget.py
    `driver_limits`), None for unlimited."""

    driver_tokens: int | None = None
    driver_cost_usd: float | None = None
    driver_calls: int | None = None

    def of(self, limit: str) -> int | float | None:
        """The limit a refusal names (`tokens` | `cost_usd` | `calls`, the event's names)."""
        return {"tokens": self.driver_tokens, "cost_usd": self.driver_cost_usd,
                "calls": self.driver_calls}[limit]


@dataclass(frozen=True)
class GatewayConfig(Part):
    """gateway.json: the driver string, the provider, the pinned model and the ids a request
    may name (`models`), the wires served and the agent's (`agent_wire`), the upstream, the
    scripted driver's script (a `scripted:` driver), a `vllm/` driver's server plan, the budget
    and price entry (the ledger's), the socket."""


    driver: str = ""
    provider: str | None = None
    model: str = ""
    wires: tuple[str, ...] = ()
    agent_wire: str | None = None
    models: tuple[str, ...] = ()
    allow_models: tuple[str, ...] = ()
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    scripted: ScriptedDriver | None = None
    server: ServerPlan | None = None
    socket: str | None = None
    budget: DriverLimits = field(default_factory=DriverLimits)
    price: Price | None = None                    # the model's price entry

    @classmethod
    def read(cls, run_dir: str | Path) -> GatewayConfig:
        return cls.from_dict(read_config(run_dir))

    @property
    def script(self) -> str | None:
        """The scripted driver's script file (None for any other driver)."""
        return self.scripted.script if self.scripted else None

    @property
    def allowed(self) -> list[str]:
        """The model ids a request may name, exactly (the pinned list, else the model and its
        allowed ones)."""
        return list(dict.fromkeys(self.models or (self.model, *self.allow_models)))
