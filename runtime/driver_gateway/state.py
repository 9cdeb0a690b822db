"""A running gateway's fixed state (read once from gateway.json) and the model list it answers
itself: the run's pinned model ids are the whole list, so a scaffold that lists models before
its first call sees exactly what it may name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths

from .config import read_key
from .context import context_room, served_context
from .flights import Flights
from .gateway_config import GatewayConfig
from .ledger import Ledger
from .upstream import Upstream


class GatewayState:
    """What every request of a running gateway shares: gateway.json as read at its start
    (`config`), the run key, the upstream, the ledger and the calls in flight."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.paths = RunPaths(run_dir)
        self.config = config = GatewayConfig.read(run_dir)
        self.key = read_key(run_dir)
        up = config.upstream
        if not up.base_url:
            raise SystemExit(f"{self.paths.driver_config}: upstream.base_url is not set")
        self.upstream = Upstream(up.base_url, float(up.timeout_s), float(up.connect_timeout_s))
        self.provider_key = os.environ.get(up.key_env) if up.key_env else None
        if up.key_env and not self.provider_key:
            raise SystemExit(f"${up.key_env} is not set in the gateway's environment")
        self.auth_style = up.auth
        self.model = config.model
        self.allowed = config.allowed
        self.wires = set(config.wires)
        self.default_wire = config.agent_wire or sorted(self.wires)[0]
        self.ledger = Ledger(run_dir, config)
        self.flights = Flights()
        # a token or cost budget needs every forwarded call to carry an output cap
        self.bounded = config.budget.driver_tokens is not None or \
            config.budget.driver_cost_usd is not None
        # the served model's context (context.py): stated in the drivers file, or asked once
        # of the server (`context: ask`; a vllm/ driver's always); None: no clamp
        stated = up.context
        self.context: int | None = stated if isinstance(stated, int) else None
        if stated == "ask":
            self.context = served_context(self.upstream, self.model, self.provider_key)
        if stated is not None:
            print(f"driver gateway: the served model's context is "
                  f"{self.context or 'not reported'}"
                  + (" tokens: output caps are lowered to fit it" if self.context else ""),
                  flush=True)

    def context_room(self, forward: bytes, bound: int, cap: int, wire: str | None = None,
                     path: str = "") -> tuple[int, int, int | None]:
        """(the served context, the largest output cap it holds after this forwarded input,
        the input estimate): admission lowers a call's cap to it (context.py). A call whose
        input bound (admission.input_estimate) and cap fit the context is not counted."""
        window = self.context or 0
        if bound + cap <= window:
            return window, cap, None
        return context_room(self.upstream, self.model, window, forward, self.provider_key,
                            wire, path)

    def model_ok(self, model: str) -> bool:
        """Exactly one of the run's pinned ids (gateway.json `models`): never by prefix."""
        name = model[len("models/"):] if model.startswith("models/") else model
        return name in self.allowed


def model_list(models: list[str], one: str | None = None) -> dict[str, Any]:
    """The run's pinned models as a model list (or one model's card), in a shape the OpenAI,
    Anthropic and Gemini clients each read their own fields from."""
    def card(m):
        return {"id": m, "object": "model", "type": "model", "display_name": m,
                "created": 0, "created_at": "2025-01-01T00:00:00Z", "owned_by": "a2c",
                "name": f"models/{m}", "displayName": m,
                "supportedGenerationMethods": ["generateContent", "streamGenerateContent",
                                               "countTokens"]}
    if one is not None:
        return card(one)
    return {"object": "list", "data": [card(m) for m in models], "has_more": False,
            "first_id": models[0], "last_id": models[-1],
            "models": [card(m) for m in models]}
