"""The four driver wire formats (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses,
Gemini generateContent), one module each, registered by name in `WIRES`; the one place the
gateway, the analysis and the scripted driver learn how a wire routes, names its model, streams,
reports usage, answers errors, and carries a conversation.

Bottom layer: standard library only, importing no area (compiler, runtime, analysis).
"""

from __future__ import annotations

# Importing a wire module registers it (in routes.NAMES order, whatever the import order).
from a2c.wires import anthropic, gemini, openai_chat, openai_responses  # noqa: F401
from a2c.wires.base import (
    WIRES,
    Wire,
    error_body,
    provider_wires,
    request_streams,
    wire_for_path,
)
from a2c.wires.records import Conversation, Item, Tool, ToolCall, Turn
from a2c.wires.routes import NAMES, Route, generation_call, normalize, route
from a2c.wires.usage import Usage

PROVIDER_WIRES = provider_wires()
"""The wires each built-in provider serves: {"anthropic": ("anthropic",), "gemini": ("gemini",),
"openai": ("openai-chat", "openai-responses")}."""

VLLM_WIRES = ("openai-chat", "openai-responses", "anthropic")
"""The wires a vLLM OpenAI-compatible server serves from one port (Chat Completions, Responses and
Anthropic Messages): a `vllm/...` driver's, the one a2c starts (runtime/run/driver_server.py)."""

BUDGET_STATUS = {name: wire.budget_status for name, wire in WIRES.items()}
"""Out-of-credit statuses: Anthropic answers a spent credit balance with 400
invalid_request_error; OpenAI with 429 insufficient_quota (its clients treat that code as final);
Gemini with 429 RESOURCE_EXHAUSTED and a per-day QuotaFailure."""

__all__ = ["BUDGET_STATUS", "NAMES", "PROVIDER_WIRES", "VLLM_WIRES", "WIRES", "Conversation",
           "Item", "Route",
           "Tool", "ToolCall", "Turn", "Usage", "Wire", "error_body", "generation_call",
           "normalize", "request_streams", "route", "wire_for_path"]
