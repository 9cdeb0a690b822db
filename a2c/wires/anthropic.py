"""Anthropic Messages (`/v1/messages`): usage in `message_start` and `message_delta`, content
as typed blocks (text, thinking, tool_use), tool results as user-message blocks, errors as
`{"type": "error", "error": {...}}`. Claude Code speaks it."""

from __future__ import annotations

import json
from typing import Any

from a2c.wires.base import Reading, Wire, positive_int, referenced, register
from a2c.wires.content import arguments, history_text, text_of
from a2c.wires.records import Answer, Conversation, Item, Tool, ToolCall, Turn, group, pieces
from a2c.wires.routes import Endpoint
from a2c.wires.sse import event as sse
from a2c.wires.strict import Unreadable, bool_field, int_field, is_int, one_of
from a2c.wires.usage import Usage, count

MIN_THINKING = 1024
"""The smallest thinking budget the API accepts (it must also stay below max_tokens)."""
_USAGE = (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
          ("cache_read_input_tokens", "cache_read_tokens"),
          ("cache_creation_input_tokens", "cache_write_tokens"))


def _fold(u: Usage, usage: dict, final: bool) -> None:
    # message_start carries input and cache counts; message_delta the cumulative output (and,
    # on newer servers, input counts again): later non-zero values win.
    for src, dst in _USAGE:
        if src in usage and (usage[src] or not final):
            setattr(u, dst, count(usage[src]))
    u.seen = True


SERVICE_TIERS = ("auto", "standard_only")
"""Anthropic's service tiers at the price table's (standard) rates; Priority Tier capacity is
bought by commitment, not chosen per request."""


PROVIDER_TOOL_PREFIXES = ("web_search_", "web_fetch_", "code_execution_", "mcp_toolset",
                          "advisor_")
PROVIDER_TOOL_FIELDS = ("mcp_servers", "container")
"""Tool types (by prefix) and request fields that ask for tools Anthropic runs itself."""

BETAS = frozenset({
    # Claude Code 2.1.332 (the pinned version) with an API key sends the first, second, and the
    # context-management, thinking-token-count and advanced-tool-use values (captured against a
    # recording upstream); the others are earlier Claude Code and SDK values. Each is metered
    # as tokens and priced as such.
    "claude-code-20250219",
    "interleaved-thinking-2025-05-14",
    "fine-grained-tool-streaming-2025-05-14",
    "token-efficient-tools-2025-02-19",
    "prompt-caching-2024-07-31",
    "prompt-caching-scope-2026-01-05",
    "context-management-2025-06-27",
    "mid-conversation-system-2026-04-07",
    "thinking-token-count-2026-05-13",
    "output-128k-2025-02-19",
    "effort-2025-11-24",
    "structured-outputs-2025-11-13",
    "advanced-tool-use-2025-11-20",
})
"""anthropic-beta values passed upstream; any other value is dropped from the header. Claude
Code sends betas its request bodies rely on (interleaved thinking, context management,
fine-grained tool streaming), while others open features the gateway does not meter (files,
batches, MCP connectors, code execution, web fetch, the advisor tool's second model), does not
price (the 1M context window and the 1-hour cache, billed at higher rates) or that belong to
another credential (oauth)."""

_ANSWER_ONLY = frozenset({"max_tokens", "stream", "temperature", "top_p", "top_k",
                          "stop_sequences", "metadata", "service_tier", "speed"})
"""Fields of a Messages request that shape the answer, not the input (left out of a count)."""


def _media(blocks: Any, reading: Reading) -> None:
    """Count the inline media of content blocks (tool results' blocks included); refuse media
    named by URL or file id."""
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("image", "document"):
            source = block.get("source")
            stype = source.get("type") if isinstance(source, dict) else None
            if stype in ("url", "file"):
                raise referenced(f"an Anthropic {kind} block")
            if stype == "content":
                _media(source.get("content"), reading)
            elif stype == "base64":
                reading.media("image" if kind == "image" else "long", source.get("data"))
        elif kind == "container_upload":
            raise referenced("a container_upload block")
        elif kind == "tool_result":
            _media(block.get("content"), reading)


def _blocks(blocks: list[dict[str, Any]]) -> Turn:
    turn = Turn()
    texts, thoughts = [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind in ("thinking", "redacted_thinking"):
            thoughts.append(block.get("thinking") or "")
        elif kind in ("tool_use", "server_tool_use"):
            turn.tool_calls.append(ToolCall(block.get("id") or "", block.get("name") or "",
                                            arguments(block.get("input")),
                                            synth=not block.get("id")))
    turn.text, turn.reasoning = "".join(texts), "".join(thoughts)
    return turn


def _tool_types(tools: Any) -> list[str]:
    return [t.get("type") for t in tools if isinstance(t, dict) and
            isinstance(t.get("type"), str)] if isinstance(tools, list) else []


def _answer_blocks(answer: Answer) -> list[dict]:
    blocks: list[dict] = [{"type": "text", "text": answer.text}] if answer.text else []
    for i, call in enumerate(answer.calls):
        blocks.append({"type": "tool_use", "id": f"toolu_{answer.id(f':{i}')}",
                       "name": call.name, "input": call.arguments})
    return blocks or [{"type": "text", "text": "."}]


def _block_events(index: int, block: dict) -> list[bytes]:
    """One content block of a whole answer as its start, deltas and stop events."""
    if block["type"] == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
    else:
        start = dict(block, input={})
        deltas = [{"type": "input_json_delta", "partial_json": p}
                  for p in pieces(json.dumps(block["input"]))]
    out = [sse("content_block_start", {"type": "content_block_start", "index": index,
                                       "content_block": start})]
    out += [sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                        "delta": d}) for d in deltas]
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out


@register
class Anthropic(Wire):
    name = "anthropic"
    provider = "anthropic"
    auth = "x-api-key"
    budget_status = 400     # a spent credit balance: 400 invalid_request_error
    rank, vllm_rank = 0, 2
    endpoints = (Endpoint("/v1/messages", "generate"),
                 Endpoint("/v1/messages/count_tokens", "count"))
    query_keys = {"beta": ("true",)}        # Claude Code sends ?beta=true
    headers = {"anthropic-version": None, "anthropic-beta": BETAS}
    client_headers = {"anthropic-version": "2023-06-01"}
    path_looks = ("/v1/messages", "/messages")

    def looks_like_body(self, body: dict) -> bool:
        return "system" in body or "max_tokens" in body and "messages" in body

    def provider_tools(self, body: dict) -> list[str]:
        return [t for t in _tool_types(body.get("tools"))
                if t.startswith(PROVIDER_TOOL_PREFIXES)] + \
            [f for f in PROVIDER_TOOL_FIELDS if body.get(f)]

    def read_request(self, body: dict) -> Reading:
        reading = Reading(cap=int_field(body, "max_tokens", "max_tokens", 1))
        thinking = body.get("thinking")
        if thinking is not None and not isinstance(thinking, dict):
            raise Unreadable("thinking must be an object")
        int_field(thinking, "budget_tokens", "thinking.budget_tokens", 0)
        bool_field(body, "stream", "stream")
        one_of(body, "service_tier", "service_tier", SERVICE_TIERS,
               "the price table holds standard rates ('auto' or 'standard_only')")
        one_of(body, "speed", "speed", ("standard",),
               "fast mode is billed at a premium the price table does not hold")
        for message in body.get("messages") or []:
            if isinstance(message, dict):
                _media(message.get("content"), reading)
        return reading

    def count_request(self, body: dict, path: str) -> tuple[str, dict] | None:
        query = path.partition("?")[2]
        target = "/v1/messages/count_tokens" + (f"?{query}" if query else "")
        return target, {k: v for k, v in body.items() if k not in _ANSWER_ONLY}

    def count_of(self, answer: Any) -> int | None:
        value = answer.get("input_tokens") if isinstance(answer, dict) else None
        return value if is_int(value) and value >= 0 else None

    def set_output_cap(self, body: dict, cap: int) -> None:
        body["max_tokens"] = cap
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and positive_int(thinking.get("budget_tokens")) and \
                thinking["budget_tokens"] >= cap:
            if cap - 1 >= MIN_THINKING:
                thinking["budget_tokens"] = cap - 1
            else:
                body.pop("thinking")

    def read_usage(self, obj: Any, u: Usage) -> None:
        if not isinstance(obj, dict):
            return
        kind = obj.get("type")
        if kind == "message_start" and isinstance(obj.get("message"), dict):
            msg = obj["message"]
            u.model = msg.get("model") or u.model
            if isinstance(msg.get("usage"), dict):
                _fold(u, msg["usage"], final=False)
        elif kind == "message_delta" and isinstance(obj.get("usage"), dict):
            _fold(u, obj["usage"], final=True)
        elif kind == "message" or "usage" in obj and kind is None:
            u.model = obj.get("model") or u.model
            if isinstance(obj.get("usage"), dict):
                _fold(u, obj["usage"], final=False)

    def usage_fields(self, u: Usage) -> dict:
        return {"input_tokens": u.input_tokens, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": u.cache_read_tokens, "output_tokens": u.output_tokens}

    def error(self, status: int, kind: str, message: str) -> dict:
        etype = {"auth": "authentication_error", "timeout": "timeout_error",
                 "upstream": "api_error", "not_served": "not_found_error"}.get(
                     kind, "invalid_request_error")
        return {"type": "error", "error": {"type": etype, "message": message}}

    def request_items(self, body: dict[str, Any]) -> list[Item]:
        items: list[Item] = []
        system = text_of(body.get("system"))
        if system:
            items.append(Item("system", system))
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            role, content = message.get("role"), message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else \
                [b for b in content or [] if isinstance(b, dict)]
            if role == "assistant":
                items.append(Item.assistant(_blocks(blocks)))
                continue
            texts = []
            for block in blocks:
                if block.get("type") == "tool_result":
                    items.append(Item.tool_result(block.get("tool_use_id"), None,
                                                  text_of(block.get("content")),
                                                  bool(block.get("is_error"))))
                elif block.get("type") == "text":
                    texts.append(block.get("text") or "")
                elif block.get("type"):
                    texts.append(text_of(block))
            if any(t.strip() for t in texts):
                items.append(Item("user", "\n".join(texts)))
        return items

    def response(self, body: dict[str, Any]) -> Turn:
        turn = _blocks([b for b in body.get("content") or [] if isinstance(b, dict)])
        turn.model, turn.stop = body.get("model"), body.get("stop_reason")
        turn.usage = self.usage_of(body)
        return turn

    def response_stream(self, events: list[tuple[str | None, Any]]) -> Turn:
        blocks: dict[int, dict[str, Any]] = {}
        partial: dict[int, str] = {}
        model = stop = None
        for name, data in events:
            if not isinstance(data, dict):
                continue
            kind = data.get("type") or name
            if kind == "message_start":
                model = (data.get("message") or {}).get("model")
            elif kind == "content_block_start":
                blocks[int(data.get("index", len(blocks)))] = dict(data.get("content_block")
                                                                   or {})
            elif kind == "content_block_delta":
                index = int(data.get("index", 0))
                block = blocks.setdefault(index, {"type": "text", "text": ""})
                delta = data.get("delta") or {}
                if delta.get("type") == "text_delta":
                    block["text"] = (block.get("text") or "") + (delta.get("text") or "")
                elif delta.get("type") == "input_json_delta":
                    partial[index] = partial.get(index, "") + (delta.get("partial_json") or "")
                elif delta.get("type") == "thinking_delta":
                    block["thinking"] = (block.get("thinking") or "") + \
                        (delta.get("thinking") or "")
            elif kind == "message_delta":
                stop = (data.get("delta") or {}).get("stop_reason")
        for index, text in partial.items():
            blocks[index]["input"] = arguments(text)
        turn = _blocks([blocks[i] for i in sorted(blocks)])
        turn.model, turn.stop = model, stop
        turn.usage = self.usage_of(*(data for _, data in events))
        return turn

    def conversation(self, body: dict, model: str = "", stream: bool = False) -> Conversation:
        tools = [Tool(t["name"], t.get("input_schema") or {}, t.get("description", ""))
                 for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t
                 and ("input_schema" in t or "type" not in t or t.get("type") == "custom")]
        entries = [(m.get("role") == "assistant", history_text(m.get("content")))
                   for m in body.get("messages") or [] if isinstance(m, dict)]
        results, first = group(entries)
        return Conversation(self.name, str(body.get("model", "")), tools,
                            history_text(body.get("system")) + "\n" + first, results,
                            stream=bool(body.get("stream")))

    def question(self, model: str, system: str, user: str, max_tokens: int
                 ) -> tuple[str, dict[str, Any]]:
        return "/v1/messages", {"model": model, "max_tokens": max_tokens, "system": system,
                                "messages": [{"role": "user", "content": user}]}

    def answer(self, answer: Answer) -> dict:
        return {"id": f"msg_{answer.id()}", "type": "message", "role": "assistant",
                "model": answer.model, "content": _answer_blocks(answer),
                "stop_reason": "tool_use" if answer.calls else "end_turn",
                "stop_sequence": None, "usage": self.usage_fields(answer.usage)}

    def answer_stream(self, answer: Answer, conv: Conversation, query: str
                      ) -> tuple[list[bytes], str]:
        whole = self.answer(answer)
        start_usage = dict(whole["usage"], output_tokens=0)
        out = [sse("message_start", {"type": "message_start", "message": dict(
            whole, content=[], stop_reason=None, usage=start_usage)}),
            sse("ping", {"type": "ping"})]
        for index, block in enumerate(whole["content"]):
            out += _block_events(index, block)
        out.append(sse("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": whole["stop_reason"],
                                                   "stop_sequence": None},
                                         "usage": {"output_tokens": answer.usage.output_tokens}}))
        out.append(sse("message_stop", {"type": "message_stop"}))
        return out, "text/event-stream"
