"""One normalized view of a request, whatever its wire: the model turns already played, what
came back after each, the tools offered, and the prompt text.

The driver keeps no state between requests: the script position is computed from this view
alone, so a scaffold that retries, forks a sub-conversation or restarts gets the same reply to
the same request. A "model turn" is a run of consecutive model-authored entries (assistant
messages, Responses output items, Gemini `model` contents): a reply made of reasoning text plus a
tool call counts once, however the scaffold splits it when it sends the history back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Responses items the model produced (everything else in `input` came from the user or tools).
_RESPONSES_MODEL_ITEMS = {"function_call", "local_shell_call", "custom_tool_call", "reasoning",
                          "web_search_call", "computer_call", "file_search_call"}


@dataclass
class Tool:
    """A tool the scaffold offers. `kind` is function, local_shell (Codex's built-in) or custom."""

    name: str
    parameters: dict = field(default_factory=dict)
    description: str = ""
    kind: str = "function"


@dataclass
class Conversation:
    wire: str
    model: str
    tools: list[Tool]
    prompt: str                     # system text plus the first user message (format detection)
    results: list[str]              # per model turn in the history: the text that came after it
    stream: bool = False
    include_usage: bool = False
    json_reply: bool = False        # the request asks for a JSON answer (Gemini's response schema)


def _text(value: Any) -> str:
    """The readable text in a content value of any wire (string, parts, blocks, nested)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_text(v) for v in value) if t)
    if isinstance(value, dict):
        for key in ("text", "output", "content", "response", "functionResponse", "result"):
            if key in value:
                inner = value[key]
                return inner if isinstance(inner, str) else (_text(inner) or json.dumps(inner))
        return ""
    return str(value)


def _group(entries: list[tuple[bool, str]]) -> tuple[list[str], str]:
    """(is_model, text) entries -> texts after each model turn, and the text before the first."""
    results: list[str] = []
    before: list[str] = []
    previous_model = False
    for is_model, text in entries:
        if is_model:
            if not previous_model:
                results.append("")
        elif results:
            results[-1] = "\n".join(t for t in (results[-1], text) if t)
        else:
            before.append(text)
        previous_model = is_model
    return results, "\n".join(t for t in before if t)


def _anthropic(body: dict) -> Conversation:
    tools = [Tool(t["name"], t.get("input_schema") or {}, t.get("description", ""))
             for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t
             and ("input_schema" in t or "type" not in t or t.get("type") == "custom")]
    entries = [(m.get("role") == "assistant", _text(m.get("content")))
               for m in body.get("messages") or [] if isinstance(m, dict)]
    results, first = _group(entries)
    return Conversation("anthropic", str(body.get("model", "")), tools,
                        _text(body.get("system")) + "\n" + first, results,
                        stream=bool(body.get("stream")))


def _chat(body: dict) -> Conversation:
    tools = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            tools.append(Tool(fn["name"], fn.get("parameters") or {}, fn.get("description", "")))
    for fn in body.get("functions") or []:
        if isinstance(fn, dict) and fn.get("name"):
            tools.append(Tool(fn["name"], fn.get("parameters") or {}, fn.get("description", "")))
    system, entries = [], []
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role in ("system", "developer") and not entries:
            system.append(_text(m.get("content")))
            continue
        entries.append((role == "assistant", _text(m.get("content"))))
    results, first = _group(entries)
    options = body.get("stream_options") or {}
    return Conversation("openai-chat", str(body.get("model", "")), tools,
                        "\n".join(system) + "\n" + first, results,
                        stream=bool(body.get("stream")),
                        include_usage=bool(options.get("include_usage")))


def _responses(body: dict) -> Conversation:
    tools = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        kind = t.get("type", "function")
        if kind == "function" and t.get("name"):
            tools.append(Tool(t["name"], t.get("parameters") or {}, t.get("description", "")))
        elif kind == "local_shell":
            tools.append(Tool("local_shell", {}, "", kind="local_shell"))
        elif kind == "custom" and t.get("name"):
            tools.append(Tool(t["name"], {}, t.get("description", ""), kind="custom"))
    items = body.get("input")
    items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) \
        else [i for i in items or [] if isinstance(i, dict)]
    entries = []
    for item in items:
        kind = item.get("type", "message")
        is_model = kind in _RESPONSES_MODEL_ITEMS or (kind == "message"
                                                      and item.get("role") == "assistant")
        entries.append((is_model, "" if is_model else _text(item.get("output", item.get("content")))))
    results, first = _group(entries)
    return Conversation("openai-responses", str(body.get("model", "")), tools,
                        _text(body.get("instructions")) + "\n" + first, results,
                        stream=bool(body.get("stream")))


def _gemini(body: dict, model: str, stream: bool) -> Conversation:
    tools = []
    for group in body.get("tools") or []:
        for fn in (group or {}).get("functionDeclarations") or (group or {}).get(
                "function_declarations") or []:
            if isinstance(fn, dict) and fn.get("name"):
                params = fn.get("parametersJsonSchema") or fn.get("parameters") or {}
                tools.append(Tool(fn["name"], _lower_types(params), fn.get("description", "")))
    entries = [(c.get("role") == "model", _text(c.get("parts")))
               for c in body.get("contents") or [] if isinstance(c, dict)]
    results, first = _group(entries)
    system = body.get("systemInstruction") or body.get("system_instruction") or {}
    config = body.get("generationConfig") or {}
    json_reply = str(config.get("responseMimeType", "")).startswith("application/json")
    return Conversation("gemini", model, tools, _text(system.get("parts") if isinstance(
        system, dict) else system) + "\n" + first, results, stream=stream, json_reply=json_reply)


def _lower_types(schema: Any) -> Any:
    """Gemini's OpenAPI-style schemas write types in capitals (STRING, OBJECT)."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lower_types(v))
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [_lower_types(v) for v in schema]
    return schema


def read(wire: str, body: dict, model: str = "", stream: bool = False) -> Conversation:
    """The conversation in a request body of `wire` (for gemini the model and streaming come
    from the path)."""
    if wire == "anthropic":
        return _anthropic(body)
    if wire == "openai-chat":
        return _chat(body)
    if wire == "openai-responses":
        return _responses(body)
    if wire == "gemini":
        return _gemini(body, model, stream)
    raise ValueError(f"unknown wire {wire!r}")
