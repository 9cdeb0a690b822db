"""A small client for the scripted driver's tests: posts a request, parses the reply of any wire
(SSE parsed event by event, as the providers' SDKs do), and folds it into one plain summary
{text, calls: [(name, args)], usage, stop} so streamed and whole replies can be compared."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
         "openai-responses": "/v1/responses"}


def gemini_path(model: str, stream: bool, alt_sse: bool = True) -> str:
    if stream:
        return f"/v1beta/models/{model}:streamGenerateContent" + ("?alt=sse" if alt_sse else "")
    return f"/v1beta/models/{model}:generateContent"


def post(base: str, path: str, body: dict) -> tuple[int, dict, bytes]:
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()   # de-chunked by http.client
    finally:
        conn.close()


def get(base: str, path: str) -> tuple[int, dict]:
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def parse_sse(raw: bytes) -> list[tuple[str | None, object]]:
    """Events as (event name, data): blocks separated by a blank line, `event:`/`data:` fields,
    multi-line data joined; `[DONE]` kept as a string."""
    events = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            else:
                raise AssertionError(f"not an SSE line: {line!r}")
        text = "\n".join(data)
        events.append((name, text if text == "[DONE]" else json.loads(text)))
    return events


def request_body(wire: str, messages: list | None = None, tools: list | None = None,
                 stream: bool = False, model: str = "m-1", **extra) -> dict:
    body: dict = {"model": model, "stream": stream, **extra}
    if wire == "anthropic":
        body.update(messages=messages or [{"role": "user", "content": "go"}], max_tokens=100)
        if tools is not None:
            body["tools"] = tools
    elif wire == "openai-chat":
        body.update(messages=messages or [{"role": "user", "content": "go"}])
        if tools is not None:
            body["tools"] = tools
    elif wire == "openai-responses":
        body.update(input=messages or [{"type": "message", "role": "user",
                                        "content": [{"type": "input_text", "text": "go"}]}])
        if tools is not None:
            body["tools"] = tools
    else:
        body = {"contents": messages or [{"role": "user", "parts": [{"text": "go"}]}], **extra}
        if tools is not None:
            body["tools"] = tools
    return body


def ask(base: str, wire: str, body: dict, stream: bool = False, model: str = "m-1",
        alt_sse: bool = True) -> dict:
    """Send and fold the reply into {text, calls, usage, stop, raw}."""
    path = gemini_path(model, stream, alt_sse) if wire == "gemini" else PATHS[wire]
    status, headers, raw = post(base, path, body)
    assert status == 200, (status, raw[:500])
    if not stream:
        assert headers.get("Content-Type") == "application/json"
        return fold(wire, json.loads(raw)) | {"raw": json.loads(raw)}
    if wire == "gemini" and not alt_sse:
        chunks = json.loads(raw)
        return fold_gemini_chunks(chunks) | {"raw": chunks}
    assert headers.get("Content-Type") == "text/event-stream"
    events = parse_sse(raw)
    folder = {"anthropic": fold_anthropic_stream, "openai-chat": fold_chat_stream,
              "openai-responses": fold_responses_stream,
              "gemini": lambda ev: fold_gemini_chunks([d for _, d in ev])}[wire]
    return folder(events) | {"raw": events}


# ----------------------------------------------------------------------------- whole replies
def fold(wire: str, reply: dict) -> dict:
    if wire == "anthropic":
        text = "".join(b["text"] for b in reply["content"] if b["type"] == "text")
        calls = [(b["name"], b["input"]) for b in reply["content"] if b["type"] == "tool_use"]
        u = reply["usage"]
        return {"text": text, "calls": calls, "stop": reply["stop_reason"],
                "usage": (u["input_tokens"], u["output_tokens"], u["cache_read_input_tokens"])}
    if wire == "openai-chat":
        msg = reply["choices"][0]["message"]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in msg.get("tool_calls") or []]
        u = reply["usage"]
        cached = u["prompt_tokens_details"]["cached_tokens"]
        return {"text": msg["content"] or "", "calls": calls,
                "stop": reply["choices"][0]["finish_reason"],
                "usage": (u["prompt_tokens"] - cached, u["completion_tokens"], cached)}
    if wire == "openai-responses":
        return _responses_summary(reply)
    return fold_gemini_chunks([reply])


def _responses_summary(response: dict) -> dict:
    text, calls = "", []
    for item in response["output"]:
        if item["type"] == "message":
            text += "".join(p["text"] for p in item["content"] if p["type"] == "output_text")
        elif item["type"] == "function_call":
            calls.append((item["name"], json.loads(item["arguments"])))
        elif item["type"] == "local_shell_call":
            calls.append(("local_shell", item["action"]))
    u = response["usage"]
    cached = u["input_tokens_details"]["cached_tokens"]
    return {"text": text, "calls": calls, "stop": response["status"],
            "usage": (u["input_tokens"] - cached, u["output_tokens"], cached)}


# --------------------------------------------------------------------------------- streams
def fold_anthropic_stream(events) -> dict:
    names = [n for n, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop", names
    assert all(n == d["type"] for n, d in events)
    start = events[0][1]["message"]
    blocks: dict[int, dict] = {}
    open_blocks: set[int] = set()
    stop, out_tokens = None, None
    for name, data in events[1:]:
        if name == "content_block_start":
            assert data["index"] not in blocks
            blocks[data["index"]] = dict(data["content_block"], _json="")
            open_blocks.add(data["index"])
        elif name == "content_block_delta":
            assert data["index"] in open_blocks
            block, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta"
                block["_json"] += delta["partial_json"]
        elif name == "content_block_stop":
            open_blocks.remove(data["index"])
        elif name == "message_delta":
            assert not open_blocks
            stop, out_tokens = data["delta"]["stop_reason"], data["usage"]["output_tokens"]
    text = "".join(b["text"] for _, b in sorted(blocks.items()) if b["type"] == "text")
    calls = [(b["name"], json.loads(b["_json"])) for _, b in sorted(blocks.items())
             if b["type"] == "tool_use"]
    u = start["usage"]
    return {"text": text, "calls": calls, "stop": stop,
            "usage": (u["input_tokens"], out_tokens, u["cache_read_input_tokens"])}


def fold_chat_stream(events) -> dict:
    assert events[-1][1] == "[DONE]"
    text, calls, stop, usage = "", {}, None, None
    for _, chunk in events[:-1]:
        assert chunk["object"] == "chat.completion.chunk"
        if chunk.get("usage"):
            u = chunk["usage"]
            cached = u["prompt_tokens_details"]["cached_tokens"]
            usage = (u["prompt_tokens"] - cached, u["completion_tokens"], cached)
        for choice in chunk["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                fn = tc.get("function") or {}
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            stop = choice.get("finish_reason") or stop
    return {"text": text, "calls": [(c["name"], json.loads(c["arguments"]))
                                    for _, c in sorted(calls.items())],
            "stop": stop, "usage": usage}


def fold_responses_stream(events) -> dict:
    names = [n for n, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed", names
    seqs = [d["sequence_number"] for _, d in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    items: dict[int, dict] = {}
    arguments: dict[int, str] = {}
    texts: dict[int, str] = {}
    for name, data in events:
        assert data["type"] == name
        if name == "response.output_item.added":
            items[data["output_index"]] = data["item"]
        elif name == "response.function_call_arguments.delta":
            arguments[data["output_index"]] = arguments.get(data["output_index"], "") + data["delta"]
        elif name == "response.function_call_arguments.done":
            assert data["arguments"] == arguments[data["output_index"]]
        elif name == "response.output_text.delta":
            texts[data["output_index"]] = texts.get(data["output_index"], "") + data["delta"]
        elif name == "response.output_item.done":
            items[data["output_index"]] = data["item"]
    summary = _responses_summary(events[-1][1]["response"])
    # what the deltas built equals the completed response
    for index, args in arguments.items():
        assert json.loads(args) == json.loads(items[index]["arguments"])
    assert "".join(texts[i] for i in sorted(texts)) == summary["text"]
    return summary


def fold_gemini_chunks(chunks: list[dict]) -> dict:
    text, calls, stop, usage = "", [], None, None
    for chunk in chunks:
        cand = chunk["candidates"][0]
        assert cand["content"]["role"] == "model"
        for part in cand["content"]["parts"]:
            if "text" in part:
                text += part["text"]
            if "functionCall" in part:
                calls.append((part["functionCall"]["name"], part["functionCall"]["args"]))
        stop = cand.get("finishReason") or stop
        if "usageMetadata" in chunk:
            u = chunk["usageMetadata"]
            cached = u.get("cachedContentTokenCount", 0)
            usage = (u["promptTokenCount"] - cached, u["candidatesTokenCount"], cached)
    return {"text": text, "calls": calls, "stop": stop, "usage": usage}
