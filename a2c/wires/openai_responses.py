"""OpenAI Responses (`/v1/responses`): `input` items (messages, function_call,
function_call_output, reasoning, Codex's local_shell_call and custom_tool_call), `output` items in
the answer, streamed as typed `response.*` events ending in `response.completed`. Codex speaks
it; errors and budget status as Chat Completions."""

from __future__ import annotations

import json
import time
from typing import Any

from a2c.wires.base import Reading, Wire, referenced, register
from a2c.wires.content import arguments, history_text, text_of
from a2c.wires.openai_chat import data_url, media_kind, openai_error, provider_tools, service_tier
from a2c.wires.records import Answer, Conversation, Item, Tool, ToolCall, Turn, group, pieces
from a2c.wires.routes import Endpoint
from a2c.wires.sse import event as sse
from a2c.wires.strict import Unreadable, absent, bool_field, int_field, is_int
from a2c.wires.usage import Usage

# Responses items the model produced (everything else in `input` came from the user or tools).
_MODEL_ITEMS = {"function_call", "local_shell_call", "custom_tool_call", "reasoning",
                "web_search_call", "computer_call", "file_search_call"}
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


_STORED = "input the provider holds (a stored response, conversation or prompt) is not in the " \
    "request, so nothing bounds its tokens; send the whole input (Codex does)"


_ANSWER_ONLY = frozenset({"max_output_tokens", "stream", "stream_options", "temperature",
                          "top_p", "top_logprobs", "service_tier", "store", "metadata",
                          "include", "user", "prompt_cache_key", "prompt_cache_retention",
                          "safety_identifier", "max_tool_calls", "background"})
"""Fields of a Responses request that shape the answer, not the input (left out of a count)."""


def _parts(parts: Any, reading: Reading) -> None:
    """Count the inline media of `input_*` content parts; refuse media by URL or file id."""
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_image", "computer_screenshot"):
            if part.get("file_id") is not None:
                raise referenced(f"an {kind} part")
            reading.media("image", data_url(part.get("image_url"), f"an {kind} part"))
        elif kind == "input_file":
            if part.get("file_id") is not None or part.get("file_url") is not None or \
                    not isinstance(part.get("file_data"), str):
                raise referenced("an input_file part")
            reading.media(media_kind(part["file_data"]), part["file_data"])
        elif kind == "input_audio":
            audio = part.get("input_audio")
            reading.media("long", audio.get("data") if isinstance(audio, dict) else None)


def _input_media(given: Any, reading: Reading) -> None:
    for item in given if isinstance(given, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "item_reference":
            raise Unreadable(f"an item_reference input is refused: {_STORED}")
        _parts(item.get("content"), reading)
        output = item.get("output")
        _parts([output] if isinstance(output, dict) else output, reading)


def _call(item: dict[str, Any]) -> ToolCall:
    call_id = item.get("call_id") or item.get("id") or ""
    if item.get("type") == "local_shell_call":
        action = item.get("action") or {}
        return ToolCall(call_id, "local_shell", {k: v for k, v in action.items() if k != "type"},
                        synth=not call_id)
    if item.get("type") == "custom_tool_call":
        return ToolCall(call_id, item.get("name") or "", {"input": item.get("input")},
                        synth=not call_id)
    return ToolCall(call_id, item.get("name") or "", arguments(item.get("arguments")),
                    synth=not call_id)


def _output(output: list[Any], turn: Turn) -> Turn:
    for item in output or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            turn.text += text_of(item.get("content"))
        elif kind == "reasoning":
            turn.reasoning += text_of(item.get("summary"))
        elif kind in _CALLS:
            turn.tool_calls.append(_call(item))
    return turn


def _answer_items(answer: Answer) -> list[dict]:
    items: list[dict] = []
    if answer.text or not answer.calls:
        items.append({"type": "message", "id": f"msg_{answer.id(':m')}", "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": answer.text or ".",
                                   "annotations": []}]})
    for i, call in enumerate(answer.calls):
        call_id = f"call_{answer.id(f':{i}')}"
        if call.kind == "local_shell":
            items.append({"type": "local_shell_call", "id": f"lsh_{answer.id(f':{i}:i')}",
                          "call_id": call_id, "status": "completed", "action": call.arguments})
        else:
            items.append({"type": "function_call", "id": f"fc_{answer.id(f':{i}:i')}",
                          "call_id": call_id, "name": call.name,
                          "arguments": json.dumps(call.arguments), "status": "completed"})
    return items


def _item_events(event, index: int, item: dict) -> list[bytes]:
    """One output item of a whole answer as its added, delta, done events."""
    if item["type"] == "message":
        text = item["content"][0]["text"]
        out = [event("response.output_item.added", output_index=index,
                     item=dict(item, status="in_progress", content=[]))]
        part = {"type": "output_text", "text": "", "annotations": []}
        out.append(event("response.content_part.added", item_id=item["id"],
                         output_index=index, content_index=0, part=part))
        out += [event("response.output_text.delta", item_id=item["id"], output_index=index,
                      content_index=0, delta=p) for p in pieces(text)]
        out.append(event("response.output_text.done", item_id=item["id"], output_index=index,
                         content_index=0, text=text))
        out.append(event("response.content_part.done", item_id=item["id"],
                         output_index=index, content_index=0, part=dict(part, text=text)))
    elif item["type"] == "function_call":
        out = [event("response.output_item.added", output_index=index,
                     item=dict(item, status="in_progress", arguments=""))]
        out += [event("response.function_call_arguments.delta", item_id=item["id"],
                      output_index=index, delta=p) for p in pieces(item["arguments"])]
        out.append(event("response.function_call_arguments.done", item_id=item["id"],
                         output_index=index, arguments=item["arguments"]))
    else:
        out = [event("response.output_item.added", output_index=index,
                     item=dict(item, status="in_progress"))]
    out.append(event("response.output_item.done", output_index=index, item=item))
    return out


@register
class OpenAIResponses(Wire):
    name = "openai-responses"
    provider = "openai"
    rank, vllm_rank = 2, 1
    endpoints = (Endpoint("/v1/responses", "generate"),
                 Endpoint("/v1/responses/input_tokens", "count"))
    path_looks = ("/v1/responses", "/responses")

    def looks_like_body(self, body: dict) -> bool:
        return "input" in body

    def provider_tools(self, body: dict) -> list[str]:
        return provider_tools(body)

    def read_request(self, body: dict) -> Reading:
        reading = Reading(cap=int_field(body, "max_output_tokens", "max_output_tokens", 1))
        int_field(body, "max_tool_calls", "max_tool_calls", 1)
        bool_field(body, "stream", "stream")
        service_tier(body)
        absent(body, "background", "background", "a background response is answered, and "
               "its usage reported, by later calls the gateway does not serve")
        for key in ("previous_response_id", "conversation", "prompt"):
            absent(body, key, key, _STORED)
        _input_media(body.get("input"), reading)
        return reading

    def count_request(self, body: dict, path: str) -> tuple[str, dict] | None:
        return "/v1/responses/input_tokens", {k: v for k, v in body.items()
                                               if k not in _ANSWER_ONLY}

    def count_of(self, answer: Any) -> int | None:
        value = answer.get("input_tokens") if isinstance(answer, dict) else None
        return value if is_int(value) and value >= 0 else None

    def set_output_cap(self, body: dict, cap: int) -> None:
        body["max_output_tokens"] = cap

    def read_usage(self, obj: Any, u: Usage) -> None:
        if not isinstance(obj, dict):
            return
        resp = obj.get("response") if isinstance(obj.get("response"), dict) else obj
        if obj.get("type", "").startswith("response.") and resp is obj:
            return
        u.model = resp.get("model") or u.model
        if isinstance(resp.get("usage"), dict):
            u.read_openai_counts(resp["usage"], "input_tokens", "input_tokens_details",
                                 "output_tokens")

    def usage_fields(self, u: Usage) -> dict:
        prompt = u.input_tokens + u.cache_read_tokens
        return {"input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
                "output_tokens": u.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + u.output_tokens}

    def error(self, status: int, kind: str, message: str) -> dict:
        return openai_error(kind, message)

    def request_items(self, body: dict[str, Any]) -> list[Item]:
        items: list[Item] = []
        if body.get("instructions"):
            items.append(Item("system", text_of(body["instructions"])))
        given = body.get("input")
        if isinstance(given, str):
            return items + [Item("user", given)]
        pending: Item | None = None     # consecutive output items make one assistant turn
        for item in given or []:
            if not isinstance(item, dict):
                continue
            kind = item.get("type") or ("message" if "role" in item else None)
            if kind == "message" and item.get("role") == "assistant" or \
                    kind in _CALLS or kind == "reasoning":
                pending = pending or Item("assistant")
                if kind == "message":
                    pending.text += text_of(item.get("content"))
                elif kind == "reasoning":
                    pending.reasoning += text_of(item.get("summary"))
                else:
                    pending.tool_calls.append(_call(item))
                continue
            if kind != "message" and kind not in _OUTPUTS:
                continue
            if pending is not None:
                items.append(pending)
                pending = None
            if kind == "message":
                role = item.get("role")
                items.append(Item("system" if role in ("system", "developer") else "user",
                                  text_of(item.get("content"))))
            else:
                items.append(Item.tool_result(item.get("call_id"), None,
                                              text_of(item.get("output"))))
        if pending is not None:
            items.append(pending)
        return items

    def response(self, body: dict[str, Any]) -> Turn:
        turn = _output(body.get("output") or [], Turn())
        turn.model, turn.stop = body.get("model"), body.get("status")
        turn.usage = self.usage_of(body)
        return turn

    def response_stream(self, events: list[tuple[str | None, Any]]) -> Turn:
        done_items: list[dict[str, Any]] = []
        deltas = ""
        final: dict[str, Any] | None = None
        for name, data in events:
            if not isinstance(data, dict):
                continue
            kind = data.get("type") or name
            if kind == "response.output_item.done" and isinstance(data.get("item"), dict):
                done_items.append(data["item"])
            elif kind == "response.output_text.delta":
                deltas += data.get("delta") or ""
            elif kind in ("response.completed", "response.incomplete", "response.failed") and \
                    isinstance(data.get("response"), dict):
                final = data["response"]
        turn = Turn()
        if final is not None:
            turn.model, turn.stop = final.get("model"), final.get("status")
            turn.usage = self.usage_of(final)
        output = (final or {}).get("output") or done_items
        _output(output, turn)
        if not turn.text and deltas and not any(i.get("type") == "message" for i in output
                                                if isinstance(i, dict)):
            turn.text = deltas
        return turn

    def conversation(self, body: dict, model: str = "", stream: bool = False) -> Conversation:
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
            is_model = kind in _MODEL_ITEMS or (kind == "message" and item.get("role") == "assistant")
            entries.append((is_model, "" if is_model else
                            history_text(item.get("output", item.get("content")))))
        results, first = group(entries)
        return Conversation(self.name, str(body.get("model", "")), tools,
                            history_text(body.get("instructions")) + "\n" + first, results,
                            stream=bool(body.get("stream")))

    def question(self, model: str, system: str, user: str, max_tokens: int
                 ) -> tuple[str, dict[str, Any]]:
        return "/v1/responses", {"model": model, "max_output_tokens": max_tokens,
                                 "instructions": system, "input": user}

    def answer(self, answer: Answer) -> dict:
        return {"id": f"resp_{answer.id()}", "object": "response",
                "created_at": int(time.time()), "status": "completed", "error": None,
                "incomplete_details": None, "model": answer.model,
                "output": _answer_items(answer), "parallel_tool_calls": True,
                "usage": self.usage_fields(answer.usage)}

    def answer_stream(self, answer: Answer, conv: Conversation, query: str
                      ) -> tuple[list[bytes], str]:
        """Codex waits for `response.completed`, which carries the whole answer."""
        whole = self.answer(answer)
        seq = iter(range(1_000_000))

        def event(kind: str, **data) -> bytes:
            return sse(kind, {"type": kind, "sequence_number": next(seq), **data})

        pending = dict(whole, status="in_progress", output=[], usage=None)
        out = [event("response.created", response=pending),
               event("response.in_progress", response=pending)]
        for index, item in enumerate(whole["output"]):
            out += _item_events(event, index, item)
        out.append(event("response.completed", response=whole))
        return out, "text/event-stream"

    def count_answer(self, tokens: int) -> dict:
        return {"object": "response.input_tokens", "input_tokens": tokens}
