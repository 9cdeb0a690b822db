"""OpenAI Chat Completions (`/v1/chat/completions`): messages with roles, tool calls as
`function` objects with JSON-string arguments, streamed as `chat.completion.chunk` deltas ending
in `data: [DONE]` (usage only when `stream_options.include_usage`), errors as
`{"error": {"message", "type", "param", "code"}}` (also the shape for paths no wire claims).
Most open-source scaffolds speak it."""

from __future__ import annotations

import json
import time
from typing import Any

from a2c.wires.base import Reading, Wire, referenced, register
from a2c.wires.content import arguments, history_text, text_of
from a2c.wires.records import Answer, Conversation, Item, Tool, ToolCall, Turn, group, pieces
from a2c.wires.routes import Endpoint
from a2c.wires.sse import event as sse
from a2c.wires.strict import Unreadable, absent, bool_field, int_field, one_of
from a2c.wires.usage import Usage

MAX_CANDIDATES = 128
"""OpenAI's largest `n` (vLLM's `best_of` is held to it too)."""
SERVICE_TIERS = ("auto", "default", "flex")
"""OpenAI service tiers charged at the price table's standard rates (flex costs less); priority
and scale are billed at rates the table does not hold (both OpenAI wires)."""


PROVIDER_TOOL_TYPES = frozenset({"web_search", "web_search_preview",
                                "web_search_preview_2025_03_11", "web_search_2025_08_26",
                                "file_search", "code_interpreter", "mcp", "image_generation"})
PROVIDER_TOOL_FIELDS = ("web_search_options",)
"""Tool types and request fields that ask for tools OpenAI runs itself (both OpenAI wires)."""


def provider_tools(body: dict) -> list[str]:
    """The OpenAI provider-side tools a request names (both OpenAI wires)."""
    tools = body.get("tools")
    types = [t.get("type") for t in tools if isinstance(t, dict) and
             isinstance(t.get("type"), str)] if isinstance(tools, list) else []
    return [t for t in types if t in PROVIDER_TOOL_TYPES] + \
        [f for f in PROVIDER_TOOL_FIELDS if f in body]


def service_tier(body: dict) -> None:
    one_of(body, "service_tier", "service_tier", SERVICE_TIERS,
           "the price table holds standard rates ('auto', 'default' or 'flex')")


def data_url(url: Any, what: str) -> str:
    """An inline `data:` URL (its text), or the refusal of a URL the provider would fetch."""
    if isinstance(url, str) and url.startswith("data:"):
        return url
    raise referenced(what)


def media_kind(mime: str) -> str:
    """image | text | long, from a MIME type (or a data: URL's head)."""
    mime = mime.lower().removeprefix("data:")
    if mime.startswith("image/"):
        return "image"
    if mime.startswith(("text/", "application/json")):
        return "text"
    return "long"


def _parts(parts: Any, reading: Reading) -> None:
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "image_url":
            img = part.get("image_url")
            url = img.get("url") if isinstance(img, dict) else img
            reading.media("image", data_url(url, "an image_url part"))
        elif kind in ("video_url", "audio_url"):            # vLLM's extensions
            spec = part.get(kind)
            url = spec.get("url") if isinstance(spec, dict) else spec
            reading.media("long", data_url(url, f"a {kind} part"))
        elif kind == "input_audio":
            audio = part.get("input_audio")
            reading.media("long", audio.get("data") if isinstance(audio, dict) else None)
        elif kind == "file":
            file = part.get("file")
            if not isinstance(file, dict) or file.get("file_id") is not None or \
                    not isinstance(file.get("file_data"), str):
                raise referenced("a file part")
            reading.media(media_kind(file["file_data"]), file["file_data"])

_ERRORS = {"auth": ("invalid_request_error", "invalid_api_key"),
           "model": ("invalid_request_error", "model_not_found"),
           "budget": ("insufficient_quota", "insufficient_quota"),
           "timeout": ("server_error", "timeout"),
           "upstream": ("server_error", "upstream_unavailable"),
           "not_served": ("invalid_request_error", "not_found"),
           "bad_request": ("invalid_request_error", None)}


def openai_error(kind: str, message: str) -> dict:
    """The OpenAI error body (both OpenAI wires; 429 insufficient_quota is final to its SDKs)."""
    etype, code = _ERRORS[kind]
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


def _function_call(call: dict[str, Any]) -> ToolCall:
    fn = call.get("function") or {}
    return ToolCall(call.get("id") or "", fn.get("name") or "", arguments(fn.get("arguments")),
                    synth=not call.get("id"))


def _answer_calls(answer: Answer) -> list[dict]:
    return [{"id": f"call_{answer.id(f':{i}')}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for i, c in enumerate(answer.calls)]


@register
class OpenAIChat(Wire):
    name = "openai-chat"
    provider = "openai"
    rank, vllm_rank = 1, 0
    fallback = True
    endpoints = (Endpoint("/v1/chat/completions", "generate"),
                 Endpoint("/v1/models", "models", "GET"),
                 Endpoint("/v1/models/{model}", "models", "GET"))
    path_looks = ("/v1/chat", "/chat")

    def looks_like_body(self, body: dict) -> bool:
        return "messages" in body

    def provider_tools(self, body: dict) -> list[str]:
        return provider_tools(body)

    def read_request(self, body: dict) -> Reading:
        caps = [c for c in (int_field(body, "max_completion_tokens", "max_completion_tokens",
                                      1),
                            int_field(body, "max_tokens", "max_tokens", 1)) if c is not None]
        n = int_field(body, "n", "n", 1, MAX_CANDIDATES) or 1
        # vLLM generates best_of sequences and returns n of them: each is priced
        best_of = int_field(body, "best_of", "best_of", 1, MAX_CANDIDATES) or 1
        int_field(body, "min_tokens", "min_tokens", 0)                     # vLLM
        reading = Reading(cap=min(caps) if caps else None, candidates=max(n, best_of))
        bool_field(body, "stream", "stream")
        options = body.get("stream_options")
        if options is not None and not isinstance(options, dict):
            raise Unreadable("stream_options must be an object")
        bool_field(options, "include_usage", "stream_options.include_usage")
        service_tier(body)
        absent(body, "prediction", "prediction", "rejected predicted tokens are billed as "
               "output beyond the request's cap")
        absent(body, "audio", "audio", "audio output is billed at rates the price table does "
               "not hold")
        modalities = body.get("modalities")
        if modalities is not None and modalities != ["text"]:
            raise Unreadable("modalities other than [\"text\"] are refused: audio output is "
                             "billed at rates the price table does not hold")
        for message in body.get("messages") or []:
            if isinstance(message, dict):
                _parts(message.get("content"), reading)
        return reading

    def set_output_cap(self, body: dict, cap: int) -> None:
        named = [k for k in ("max_completion_tokens", "max_tokens")
                 if body.get(k) is not None]
        for k in named or ["max_completion_tokens"]:
            body[k] = cap

    def cap_fields_differ(self, body: dict) -> bool:
        named = [body[k] for k in ("max_completion_tokens", "max_tokens")
                 if body.get(k) is not None]
        return len(set(named)) > 1

    def ask_stream_usage(self, body: dict) -> bool:
        opts = body.get("stream_options")
        if isinstance(opts, dict) and opts.get("include_usage") is True:
            return False
        body["stream_options"] = {**(opts if isinstance(opts, dict) else {}),
                                  "include_usage": True}
        return True

    def read_usage(self, obj: Any, u: Usage) -> None:
        if not isinstance(obj, dict):
            return
        u.model = obj.get("model") or u.model
        if isinstance(obj.get("usage"), dict):
            u.read_openai_counts(obj["usage"], "prompt_tokens", "prompt_tokens_details",
                                 "completion_tokens")

    def usage_fields(self, u: Usage) -> dict:
        prompt = u.input_tokens + u.cache_read_tokens
        return {"prompt_tokens": prompt, "completion_tokens": u.output_tokens,
                "total_tokens": prompt + u.output_tokens,
                "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
                "completion_tokens_details": {"reasoning_tokens": 0}}

    def error(self, status: int, kind: str, message: str) -> dict:
        return openai_error(kind, message)

    def request_items(self, body: dict[str, Any]) -> list[Item]:
        items: list[Item] = []
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            text = text_of(message.get("content"))
            if role in ("system", "developer"):
                items.append(Item("system", text))
            elif role == "assistant":
                items.append(Item("assistant", text, text_of(message.get("reasoning_content")),
                                  [_function_call(c) for c in message.get("tool_calls") or []]))
            elif role in ("tool", "function"):
                items.append(Item.tool_result(message.get("tool_call_id"), message.get("name"),
                                              text))
            else:
                items.append(Item("user", text))
        return items

    def response(self, body: dict[str, Any]) -> Turn:
        choices = body.get("choices") or []
        message = (choices[0] or {}).get("message") or {} if choices else {}
        return Turn(text_of(message.get("content")),
                    text_of(message.get("reasoning_content") or message.get("reasoning")),
                    [_function_call(c) for c in message.get("tool_calls") or []],
                    body.get("model"), self.usage_of(body),
                    (choices[0] or {}).get("finish_reason") if choices else None)

    def response_stream(self, events: list[tuple[str | None, Any]]) -> Turn:
        turn = Turn()
        calls: dict[int, dict[str, Any]] = {}
        for _, data in events:
            if not isinstance(data, dict):
                continue
            turn.model = data.get("model") or turn.model
            self.read_usage(data, turn.usage)
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    turn.text += text_of(delta["content"])
                for key in ("reasoning_content", "reasoning"):
                    if isinstance(delta.get(key), str):
                        turn.reasoning += delta[key]
                for call in delta.get("tool_calls") or []:
                    slot = calls.setdefault(int(call.get("index", len(calls))),
                                            {"id": "", "name": "", "args": ""})
                    fn = call.get("function") or {}
                    slot["id"] = call.get("id") or slot["id"]
                    slot["name"] = slot["name"] or fn.get("name") or ""
                    slot["args"] += fn.get("arguments") or ""
                if choice.get("finish_reason"):
                    turn.stop = choice["finish_reason"]
        turn.tool_calls = [ToolCall(s["id"], s["name"], arguments(s["args"]), synth=not s["id"])
                           for s in (calls[i] for i in sorted(calls))]
        return turn

    def conversation(self, body: dict, model: str = "", stream: bool = False) -> Conversation:
        tools = []
        for t in body.get("tools") or []:
            fn = t.get("function") if isinstance(t, dict) else None
            if isinstance(fn, dict) and fn.get("name"):
                tools.append(Tool(fn["name"], fn.get("parameters") or {},
                                  fn.get("description", "")))
        for fn in body.get("functions") or []:
            if isinstance(fn, dict) and fn.get("name"):
                tools.append(Tool(fn["name"], fn.get("parameters") or {},
                                  fn.get("description", "")))
        system, entries = [], []
        for m in body.get("messages") or []:
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role in ("system", "developer") and not entries:
                system.append(history_text(m.get("content")))
                continue
            entries.append((role == "assistant", history_text(m.get("content"))))
        results, first = group(entries)
        options = body.get("stream_options") or {}
        return Conversation(self.name, str(body.get("model", "")), tools,
                            "\n".join(system) + "\n" + first, results,
                            stream=bool(body.get("stream")),
                            include_usage=bool(options.get("include_usage")))

    def question(self, model: str, system: str, user: str, max_tokens: int
                 ) -> tuple[str, dict[str, Any]]:
        return "/v1/chat/completions", {
            "model": model, "max_completion_tokens": max_tokens,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}]}

    def answer(self, answer: Answer) -> dict:
        message: dict = {"role": "assistant", "content": answer.text or None}
        if answer.calls:
            message["tool_calls"] = _answer_calls(answer)
        return {"id": f"chatcmpl-{answer.id()}", "object": "chat.completion",
                "created": int(time.time()), "model": answer.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if answer.calls else "stop"}],
                "usage": self.usage_fields(answer.usage)}

    def answer_stream(self, answer: Answer, conv: Conversation, query: str
                      ) -> tuple[list[bytes], str]:
        """Usage in a last chunk only when the request asked (`stream_options.include_usage`)."""
        head = {"id": f"chatcmpl-{answer.id()}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": answer.model}

        def chunk(delta: dict, finish: str | None = None) -> bytes:
            return sse(None, dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                                  "finish_reason": finish}]))

        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": p}) for p in pieces(answer.text)]
        for i, call in enumerate(_answer_calls(answer)):
            out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                              "function": {"name": call["function"]["name"],
                                                           "arguments": ""}}]}))
            out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                    for p in pieces(call["function"]["arguments"])]
        out.append(chunk({}, "tool_calls" if answer.calls else "stop"))
        if conv.include_usage:
            out.append(sse(None, dict(head, choices=[], usage=self.usage_fields(answer.usage))))
        out.append(sse(None, "[DONE]"))
        return out, "text/event-stream"
