"""The driver wire formats (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses,
Gemini generateContent), one class each in a module of its own, registered by name in `WIRES`;
the one place the gateway, the analysis and the scripted driver learn how a wire routes, names
its model, streams, reports usage, answers errors, carries a conversation, and is answered.

Bottom layer: standard library only, importing no area (compiler, runtime, analysis).
"""

from __future__ import annotations

# Importing a wire module registers it (in `Wire.rank` order, whatever the import order).
from a2c.wires import anthropic, gemini, openai_chat, openai_responses  # noqa: F401
from a2c.wires.base import (
    WIRES,
    Wire,
    error_body,
    fallback_wire,
    generation_call,
    looks_like_path,
    normalize,
    provider_wires,
    register,
    request_streams,
    route,
    shape,
    vllm_wires,
    wire_for_path,
)
from a2c.wires.records import Answer, Conversation, Item, Tool, ToolCall, Turn
from a2c.wires.routes import Endpoint, Route
from a2c.wires.usage import Usage

NAMES = tuple(WIRES)
"""The built-in wires, in the order every list of them is written (`Wire.rank`)."""

PROVIDER_WIRES = provider_wires()
"""The wires each built-in provider serves (provider name -> wire names)."""

VLLM_WIRES = vllm_wires()
"""The wires a vLLM OpenAI-compatible server serves from one port (Chat Completions, Responses and
Anthropic Messages): a `vllm/...` driver's, the one a2c starts (runtime/run/driver_server.py)."""

__all__ = ["NAMES", "PROVIDER_WIRES", "VLLM_WIRES", "WIRES", "Answer", "Conversation",
           "Endpoint", "Item", "Route", "Tool", "ToolCall", "Turn", "Usage", "Wire",
           "error_body", "fallback_wire", "generation_call", "looks_like_path", "normalize",
           "register", "request_streams", "route", "shape", "wire_for_path"]
