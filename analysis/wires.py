"""The four driver wire formats, read back from the gateway's record: a request body as a list of
conversation items, a response (JSON, or the raw SSE bytes of a streamed one) as one agent turn.

Items are plain dicts:
  {"kind": "system" | "user", "text"}
  {"kind": "assistant", "text", "reasoning", "tool_calls": [{"id", "name", "arguments", "synth"}]}
  {"kind": "tool_result", "call_id", "name", "content", "is_error"}
A turn is {"text", "reasoning", "tool_calls", "model", "usage", "stop"}. Every reader is
tolerant: a shape it does not know yields what it could read (never an exception).
"""

from __future__ import annotations

import json
from typing import Any

from a2c.wire_formats import WIRES, normalize, route  # noqa: F401 - WIRES read by callers


def wire_of_path(path: str | None) -> str | None:
    """The wire a recorded path belongs to, as the gateway routed it (a2c.wire_formats)."""
    return route(normalize(path)).wire if path else None


def text_of(value: Any) -> str:
    """The text in a content value: a string, a list of blocks/parts, or a block."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (text_of(v) for v in value) if t)
    if isinstance(value, dict):
        for key in ("text", "output", "content"):
            if key in value and value[key] is not None:
                return text_of(value[key])
        if value.get("type") in ("image", "image_url", "input_image"):
            return "[image]"
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def _args(value: Any) -> tuple[dict[str, Any], bool]:
    """Tool arguments as an object (a JSON string is parsed; anything else kept under `raw`)."""
    if isinstance(value, dict):
        return value, True
    if isinstance(value, str):
        if not value.strip():
            return {}, True
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"raw": value}, False
        return (parsed, True) if isinstance(parsed, dict) else ({"value": parsed}, True)
    if value is None:
        return {}, True
    return {"value": value}, True


def sse_events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of every SSE event in `raw`; data that is not JSON is kept as a
    string ("[DONE]")."""
    out: list[tuple[str | None, Any]] = []
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if not data:
            continue
        joined = "\n".join(data)
        try:
            out.append((name, json.loads(joined)))
        except ValueError:
            out.append((name, joined))
    return out


def looks_like_sse(raw: bytes) -> bool:
    head = raw.lstrip()[:200]
    return head.startswith(b"event:") or head.startswith(b"data:") or b"\ndata:" in head


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def empty_turn() -> dict[str, Any]:
    return {"text": "", "reasoning": "", "tool_calls": [], "model": None, "usage": {},
            "stop": None}


# ----------------------------------------------------------------------------- requests
def request_items(wire: str | None, body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        return []
    try:
        reader = {"anthropic": _anthropic_request, "openai-chat": _chat_request,
                  "openai-responses": _responses_request, "gemini": _gemini_request}.get(wire or "")
        if reader is None:
            reader = (_anthropic_request if "system" in body or "max_tokens" in body and
                      "messages" in body else _chat_request if "messages" in body
                      else _responses_request if "input" in body else _gemini_request)
        return reader(body)
    except (TypeError, AttributeError, KeyError, ValueError):
        return []


def _anthropic_request(body: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    system = text_of(body.get("system"))
    if system:
        items.append({"kind": "system", "text": system})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else \
            [b for b in content or [] if isinstance(b, dict)]
        if role == "assistant":
            turn = _anthropic_blocks(blocks)
            items.append({"kind": "assistant", "text": turn["text"],
                          "reasoning": turn["reasoning"], "tool_calls": turn["tool_calls"]})
            continue
        texts = []
        for block in blocks:
            if block.get("type") == "tool_result":
                items.append({"kind": "tool_result", "call_id": block.get("tool_use_id"),
                              "name": None, "content": text_of(block.get("content")),
                              "is_error": bool(block.get("is_error"))})
            elif block.get("type") == "text":
                texts.append(block.get("text") or "")
            elif block.get("type"):
                texts.append(text_of(block))
        if any(t.strip() for t in texts):
            items.append({"kind": "user", "text": "\n".join(texts)})
    return items


def _anthropic_blocks(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    turn = empty_turn()
    texts, thoughts = [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind in ("thinking", "redacted_thinking"):
            thoughts.append(block.get("thinking") or "")
        elif kind in ("tool_use", "server_tool_use"):
            args, _ = _args(block.get("input"))
            turn["tool_calls"].append({"id": block.get("id") or "", "name": block.get("name")
                                       or "", "arguments": args, "synth": not block.get("id")})
    turn["text"], turn["reasoning"] = "".join(texts), "".join(thoughts)
    return turn


def _chat_request(body: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        text = text_of(message.get("content"))
        if role in ("system", "developer"):
            items.append({"kind": "system", "text": text})
        elif role == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                args, _ = _args(fn.get("arguments"))
                calls.append({"id": call.get("id") or "", "name": fn.get("name") or "",
                              "arguments": args, "synth": not call.get("id")})
            items.append({"kind": "assistant", "text": text,
                          "reasoning": text_of(message.get("reasoning_content")),
                          "tool_calls": calls})
        elif role in ("tool", "function"):
            items.append({"kind": "tool_result", "call_id": message.get("tool_call_id"),
                          "name": message.get("name"), "content": text, "is_error": False})
        else:
            items.append({"kind": "user", "text": text})
    return items


def _responses_request(body: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if body.get("instructions"):
        items.append({"kind": "system", "text": text_of(body["instructions"])})
    given = body.get("input")
    if isinstance(given, str):
        return items + [{"kind": "user", "text": given}]
    pending: dict[str, Any] | None = None   # consecutive output items make one assistant turn

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            items.append(pending)
            pending = None

    for item in given or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            text = text_of(item.get("content"))
            if role == "assistant":
                pending = pending or {"kind": "assistant", "text": "", "reasoning": "",
                                      "tool_calls": []}
                pending["text"] += text
                continue
            flush()
            items.append({"kind": "system" if role in ("system", "developer") else "user",
                          "text": text})
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            pending = pending or {"kind": "assistant", "text": "", "reasoning": "",
                                  "tool_calls": []}
            pending["tool_calls"].append(_responses_call(item))
        elif kind == "reasoning":
            pending = pending or {"kind": "assistant", "text": "", "reasoning": "",
                                  "tool_calls": []}
            pending["reasoning"] += text_of(item.get("summary"))
        elif kind in ("function_call_output", "custom_tool_call_output",
                      "local_shell_call_output"):
            flush()
            items.append({"kind": "tool_result", "call_id": item.get("call_id"), "name": None,
                          "content": text_of(item.get("output")), "is_error": False})
    flush()
    return items


def _responses_call(item: dict[str, Any]) -> dict[str, Any]:
    call_id = item.get("call_id") or item.get("id") or ""
    if item.get("type") == "local_shell_call":
        action = item.get("action") or {}
        return {"id": call_id, "name": "local_shell", "synth": not call_id,
                "arguments": {k: v for k, v in action.items() if k != "type"}}
    if item.get("type") == "custom_tool_call":
        return {"id": call_id, "name": item.get("name") or "", "synth": not call_id,
                "arguments": {"input": item.get("input")}}
    args, _ = _args(item.get("arguments"))
    return {"id": call_id, "name": item.get("name") or "", "arguments": args,
            "synth": not call_id}


def _gemini_request(body: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if system:
        items.append({"kind": "system", "text": text_of((system or {}).get("parts")
                                                        if isinstance(system, dict) else system)})
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if content.get("role") == "model":
            turn = _gemini_parts(parts)
            items.append({"kind": "assistant", "text": turn["text"],
                          "reasoning": turn["reasoning"], "tool_calls": turn["tool_calls"]})
            continue
        texts = []
        for part in parts:
            if "functionResponse" in part:
                fr = part["functionResponse"] or {}
                response = fr.get("response")
                content_text = text_of(response.get("output", response.get("content", response))
                                       if isinstance(response, dict) else response)
                items.append({"kind": "tool_result", "call_id": fr.get("id"),
                              "name": fr.get("name"), "content": content_text,
                              "is_error": isinstance(response, dict) and "error" in response})
            elif "text" in part:
                texts.append(part.get("text") or "")
        if any(t.strip() for t in texts):
            items.append({"kind": "user", "text": "\n".join(texts)})
    return items


def _gemini_parts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    turn = empty_turn()
    for part in parts:
        if "functionCall" in part:
            fc = part["functionCall"] or {}
            args, _ = _args(fc.get("args"))
            turn["tool_calls"].append({"id": fc.get("id") or "", "name": fc.get("name") or "",
                                       "arguments": args, "synth": not fc.get("id")})
        elif "text" in part:
            if part.get("thought"):
                turn["reasoning"] += part.get("text") or ""
            else:
                turn["text"] += part.get("text") or ""
    return turn


# ----------------------------------------------------------------------------- responses
def response_turn(wire: str | None, raw: bytes | None) -> dict[str, Any]:
    """The agent turn in a response body (SSE or JSON); an empty turn for what cannot be read."""
    if not raw:
        return empty_turn()
    try:
        if looks_like_sse(raw):
            events = sse_events(raw)
            reader = {"anthropic": _anthropic_stream, "openai-chat": _chat_stream,
                      "openai-responses": _responses_stream,
                      "gemini": _gemini_stream}.get(wire or "", _chat_stream)
            return reader(events)
        body = _json(raw)
        if isinstance(body, list):   # Gemini's streamGenerateContent without alt=sse: an array
            return _gemini_stream([(None, b) for b in body])
        if not isinstance(body, dict):
            return empty_turn()
        reader = {"anthropic": _anthropic_response, "openai-chat": _chat_response,
                  "openai-responses": _responses_response,
                  "gemini": _gemini_response}.get(wire or "", _chat_response)
        return reader(body)
    except (TypeError, AttributeError, KeyError, ValueError, IndexError):
        return empty_turn()


def _anthropic_response(body: dict[str, Any]) -> dict[str, Any]:
    turn = _anthropic_blocks([b for b in body.get("content") or [] if isinstance(b, dict)])
    turn.update(model=body.get("model"), usage=body.get("usage") or {},
                stop=body.get("stop_reason"))
    return turn


def _anthropic_stream(events: list[tuple[str | None, Any]]) -> dict[str, Any]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    turn = empty_turn()
    usage: dict[str, Any] = {}
    for name, data in events:
        if not isinstance(data, dict):
            continue
        kind = data.get("type") or name
        if kind == "message_start":
            message = data.get("message") or {}
            turn["model"] = message.get("model")
            usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            blocks[int(data.get("index", len(blocks)))] = block
        elif kind == "content_block_delta":
            index = int(data.get("index", 0))
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = (block.get("text") or "") + (delta.get("text") or "")
            elif delta.get("type") == "input_json_delta":
                partial[index] = partial.get(index, "") + (delta.get("partial_json") or "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = (block.get("thinking") or "") + (delta.get("thinking") or "")
        elif kind == "message_delta":
            usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            turn["stop"] = (data.get("delta") or {}).get("stop_reason")
    for index, text in partial.items():
        args, _ = _args(text)
        blocks[index]["input"] = args
    parsed = _anthropic_blocks([blocks[i] for i in sorted(blocks)])
    parsed.update(model=turn["model"], usage=usage, stop=turn["stop"])
    return parsed


def _chat_response(body: dict[str, Any]) -> dict[str, Any]:
    turn = empty_turn()
    choices = body.get("choices") or []
    message = (choices[0] or {}).get("message") or {} if choices else {}
    turn["text"] = text_of(message.get("content"))
    turn["reasoning"] = text_of(message.get("reasoning_content") or message.get("reasoning"))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        args, _ = _args(fn.get("arguments"))
        turn["tool_calls"].append({"id": call.get("id") or "", "name": fn.get("name") or "",
                                   "arguments": args, "synth": not call.get("id")})
    turn.update(model=body.get("model"), usage=body.get("usage") or {},
                stop=(choices[0] or {}).get("finish_reason") if choices else None)
    return turn


def _chat_stream(events: list[tuple[str | None, Any]]) -> dict[str, Any]:
    turn = empty_turn()
    calls: dict[int, dict[str, Any]] = {}
    for _, data in events:
        if not isinstance(data, dict):
            continue
        turn["model"] = data.get("model") or turn["model"]
        if data.get("usage"):
            turn["usage"] = data["usage"]
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                turn["text"] += text_of(delta["content"])
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    turn["reasoning"] += delta[key]
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(call.get("index", len(calls))),
                                        {"id": "", "name": "", "args": ""})
                fn = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] = slot["name"] or fn.get("name") or ""
                slot["args"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                turn["stop"] = choice["finish_reason"]
    for index in sorted(calls):
        slot = calls[index]
        args, _ = _args(slot["args"])
        turn["tool_calls"].append({"id": slot["id"], "name": slot["name"], "arguments": args,
                                   "synth": not slot["id"]})
    return turn


def _responses_output(output: list[Any], turn: dict[str, Any]) -> dict[str, Any]:
    for item in output or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            turn["text"] += text_of(item.get("content"))
        elif kind == "reasoning":
            turn["reasoning"] += text_of(item.get("summary"))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            turn["tool_calls"].append(_responses_call(item))
    return turn


def _responses_response(body: dict[str, Any]) -> dict[str, Any]:
    turn = _responses_output(body.get("output") or [], empty_turn())
    turn.update(model=body.get("model"), usage=body.get("usage") or {},
                stop=body.get("status"))
    return turn


def _responses_stream(events: list[tuple[str | None, Any]]) -> dict[str, Any]:
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
    turn = empty_turn()
    if final is not None:
        turn.update(model=final.get("model"), usage=final.get("usage") or {},
                    stop=final.get("status"))
    output = (final or {}).get("output") or done_items
    _responses_output(output, turn)
    if not turn["text"] and deltas and not any(i.get("type") == "message" for i in output
                                               if isinstance(i, dict)):
        turn["text"] = deltas
    return turn


def _gemini_response(body: dict[str, Any]) -> dict[str, Any]:
    return _gemini_stream([(None, body)])


def _gemini_stream(events: list[tuple[str | None, Any]]) -> dict[str, Any]:
    turn = empty_turn()
    for _, data in events:
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("response"), dict):   # Code Assist envelope
            data = data["response"]
        turn["model"] = data.get("modelVersion") or turn["model"]
        if data.get("usageMetadata"):
            turn["usage"] = data["usageMetadata"]
        for candidate in (data.get("candidates") or [])[:1]:
            parts = [p for p in ((candidate or {}).get("content") or {}).get("parts") or []
                     if isinstance(p, dict)]
            piece = _gemini_parts(parts)
            turn["text"] += piece["text"]
            turn["reasoning"] += piece["reasoning"]
            turn["tool_calls"] += piece["tool_calls"]
            turn["stop"] = candidate.get("finishReason") or turn["stop"]
    return turn
