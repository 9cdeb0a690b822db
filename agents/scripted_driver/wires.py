"""A Reply in each provider's own wire format, whole or as the server-sent events it streams.

Shapes follow the providers' API references (Anthropic Messages, OpenAI Chat Completions and
Responses, Gemini generateContent), down to the event order clients depend on: Codex waits for
`response.completed`, Claude Code for `message_stop`, the OpenAI SDKs for `[DONE]`. Usage goes
in each wire's native fields, written by the wire package (`Wire.usage_fields`: the Anthropic
input count is the uncached part, the OpenAI and Gemini prompt counts include the cached part,
as those providers report them); events and error bodies come from there too.
"""

from __future__ import annotations

import hashlib
import json
import time

from a2c.agents.scripted_driver.player import Reply
from a2c.wires import WIRES
from a2c.wires.sse import event as sse

_ANTHROPIC, _CHAT = WIRES["anthropic"], WIRES["openai-chat"]
_RESPONSES, _GEMINI = WIRES["openai-responses"], WIRES["gemini"]


def _id(seed: str, n: int = 24) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


def _pieces(text: str, n: int = 3) -> list[str]:
    """Split into up to n non-empty pieces, so streamed deltas really have to be joined."""
    if len(text) < n:
        return [text] if text else []
    step = -(-len(text) // n)
    return [text[i:i + step] for i in range(0, len(text), step)]


# ------------------------------------------------------------------------------- anthropic
def _anthropic_blocks(reply: Reply, seed: str) -> list[dict]:
    blocks: list[dict] = [{"type": "text", "text": reply.text}] if reply.text else []
    for i, call in enumerate(reply.calls):
        blocks.append({"type": "tool_use", "id": f"toolu_{_id(f'{seed}:{i}')}", "name": call.name,
                       "input": call.arguments})
    return blocks or [{"type": "text", "text": "."}]


def anthropic(reply: Reply, model: str, seed: str) -> dict:
    return {"id": f"msg_{_id(seed)}", "type": "message", "role": "assistant", "model": model,
            "content": _anthropic_blocks(reply, seed),
            "stop_reason": "tool_use" if reply.calls else "end_turn", "stop_sequence": None,
            "usage": _ANTHROPIC.usage_fields(reply.usage)}


def anthropic_stream(reply: Reply, model: str, seed: str) -> list[bytes]:
    whole = anthropic(reply, model, seed)
    start_usage = dict(whole["usage"], output_tokens=0)
    out = [sse("message_start", {"type": "message_start", "message": dict(
        whole, content=[], stop_reason=None, usage=start_usage)}),
        sse("ping", {"type": "ping"})]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            out.append(sse("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": dict(block, input={})}))
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in _pieces(json.dumps(block["input"]))]
        out += [sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                            "delta": d}) for d in deltas]
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": whole["stop_reason"],
                                               "stop_sequence": None},
                                     "usage": {"output_tokens": reply.usage.output_tokens}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


# ------------------------------------------------------------------------------ openai chat
def _chat_calls(reply: Reply, seed: str) -> list[dict]:
    return [{"id": f"call_{_id(f'{seed}:{i}')}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for i, c in enumerate(reply.calls)]


def chat(reply: Reply, model: str, seed: str) -> dict:
    message: dict = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = _chat_calls(reply, seed)
    return {"id": f"chatcmpl-{_id(seed)}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if reply.calls else "stop"}],
            "usage": _CHAT.usage_fields(reply.usage)}


def chat_stream(reply: Reply, model: str, seed: str, include_usage: bool) -> list[bytes]:
    head = {"id": f"chatcmpl-{_id(seed)}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        return sse(None, dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                              "finish_reason": finish}]))

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": p}) for p in _pieces(reply.text)]
    for i, call in enumerate(_chat_calls(reply, seed)):
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                for p in _pieces(call["function"]["arguments"])]
    out.append(chunk({}, "tool_calls" if reply.calls else "stop"))
    if include_usage:
        out.append(sse(None, dict(head, choices=[], usage=_CHAT.usage_fields(reply.usage))))
    out.append(sse(None, "[DONE]"))
    return out


# ------------------------------------------------------------------------- openai responses
def _responses_items(reply: Reply, seed: str) -> list[dict]:
    items: list[dict] = []
    if reply.text or not reply.calls:
        items.append({"type": "message", "id": f"msg_{_id(seed + ':m')}", "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text or ".",
                                   "annotations": []}]})
    for i, call in enumerate(reply.calls):
        call_id = f"call_{_id(f'{seed}:{i}')}"
        if call.kind == "local_shell":
            items.append({"type": "local_shell_call", "id": f"lsh_{_id(f'{seed}:{i}:i')}",
                          "call_id": call_id, "status": "completed", "action": call.arguments})
        else:
            items.append({"type": "function_call", "id": f"fc_{_id(f'{seed}:{i}:i')}",
                          "call_id": call_id, "name": call.name,
                          "arguments": json.dumps(call.arguments), "status": "completed"})
    return items


def responses(reply: Reply, model: str, seed: str) -> dict:
    return {"id": f"resp_{_id(seed)}", "object": "response", "created_at": int(time.time()),
            "status": "completed", "error": None, "incomplete_details": None, "model": model,
            "output": _responses_items(reply, seed), "parallel_tool_calls": True,
            "usage": _RESPONSES.usage_fields(reply.usage)}


def responses_stream(reply: Reply, model: str, seed: str) -> list[bytes]:
    whole = responses(reply, model, seed)
    seq = iter(range(1_000_000))

    def event(kind: str, **data) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(seq), **data})

    pending = dict(whole, status="in_progress", output=[], usage=None)
    out = [event("response.created", response=pending),
           event("response.in_progress", response=pending)]
    for index, item in enumerate(whole["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(event("response.output_item.added", output_index=index,
                             item=dict(item, status="in_progress", content=[])))
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append(event("response.content_part.added", item_id=item["id"],
                             output_index=index, content_index=0, part=part))
            out += [event("response.output_text.delta", item_id=item["id"], output_index=index,
                          content_index=0, delta=p) for p in _pieces(text)]
            out.append(event("response.output_text.done", item_id=item["id"], output_index=index,
                             content_index=0, text=text))
            out.append(event("response.content_part.done", item_id=item["id"],
                             output_index=index, content_index=0, part=dict(part, text=text)))
        elif item["type"] == "function_call":
            out.append(event("response.output_item.added", output_index=index,
                             item=dict(item, status="in_progress", arguments="")))
            out += [event("response.function_call_arguments.delta", item_id=item["id"],
                          output_index=index, delta=p) for p in _pieces(item["arguments"])]
            out.append(event("response.function_call_arguments.done", item_id=item["id"],
                             output_index=index, arguments=item["arguments"]))
        else:
            out.append(event("response.output_item.added", output_index=index,
                             item=dict(item, status="in_progress")))
        out.append(event("response.output_item.done", output_index=index, item=item))
    out.append(event("response.completed", response=whole))
    return out


# ----------------------------------------------------------------------------------- gemini
def _gemini_parts(reply: Reply) -> list[dict]:
    parts: list[dict] = [{"text": reply.text}] if reply.text else []
    parts += [{"functionCall": {"name": c.name, "args": c.arguments}} for c in reply.calls]
    return parts or [{"text": "."}]


def gemini(reply: Reply, model: str, seed: str) -> dict:
    return {"candidates": [{"content": {"role": "model", "parts": _gemini_parts(reply)},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": _GEMINI.usage_fields(reply.usage), "modelVersion": model,
            "responseId": _id(seed)}


def gemini_chunks(reply: Reply, model: str, seed: str) -> list[dict]:
    """Text in pieces first; the last chunk carries the calls, finishReason and usage."""
    pieces = _pieces(reply.text) if reply.calls else _pieces(reply.text)[:-1]
    last_text = [] if reply.calls else [{"text": (_pieces(reply.text) or ["."])[-1]}]
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": p}]},
                               "index": 0}], "modelVersion": model, "responseId": _id(seed)}
              for p in pieces]
    final_parts = last_text + [{"functionCall": {"name": c.name, "args": c.arguments}}
                               for c in reply.calls]
    chunks.append({"candidates": [{"content": {"role": "model", "parts": final_parts},
                                   "finishReason": "STOP", "index": 0}],
                   "usageMetadata": _GEMINI.usage_fields(reply.usage), "modelVersion": model,
                   "responseId": _id(seed)})
    return chunks


def gemini_stream(reply: Reply, model: str, seed: str, alt_sse: bool) -> list[bytes]:
    chunks = gemini_chunks(reply, model, seed)
    if alt_sse:
        return [sse(None, c) for c in chunks]
    # without alt=sse the stream is one JSON array, sent element by element
    body = [b"["]
    for i, c in enumerate(chunks):
        body.append((("," if i else "") + json.dumps(c)).encode())
    body.append(b"]")
    return body


# ---------------------------------------------------------------------------------- errors
def error(wire: str, status: int, message: str) -> dict:
    """The wire's own body for a request the driver cannot read (the OpenAI shape for a path
    no wire claims)."""
    return (WIRES.get(wire) or _CHAT).error(status, "bad_request", message)
