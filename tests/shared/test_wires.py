"""The wire package (a2c/wires/): one class per wire, registered by name; the provider table the
compiler and the gateway both read; usage written by one wire module reads back the same; SSE
split and joined in one place; requests and answers read into the same typed records."""

from __future__ import annotations

import json

import pytest

from a2c.wires import NAMES, PROVIDER_WIRES, WIRES, Usage, error_body, sse, wire_for_path
from a2c.wires.reading import UsageMeter, request_items, response_turn


def test_registry_by_name_in_the_routes_order():
    assert tuple(WIRES) == NAMES
    assert all(w.name == n for n, w in WIRES.items())
    assert PROVIDER_WIRES == {"anthropic": ("anthropic",), "gemini": ("gemini",),
                              "openai": ("openai-chat", "openai-responses")}


@pytest.mark.parametrize("path,wire", [
    ("/v1/messages", "anthropic"), ("/messages", "anthropic"),
    ("/v1/chat/completions", "openai-chat"), ("/v1/responses", "openai-responses"),
    ("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini"),
    ("/v1/messages/batches", None), (None, None)])
def test_wire_for_path(path, wire):
    found = wire_for_path(path)
    assert (found.name if found else None) == wire


def _answer(name: str, fields: dict) -> dict:
    return {"usageMetadata": fields} if name == "gemini" else \
        {"type": "message", "usage": fields} if name == "anthropic" else {"usage": fields}


@pytest.mark.parametrize("name", NAMES)
def test_usage_written_by_a_wire_reads_back_the_same(name):
    wire = WIRES[name]
    written = Usage(input_tokens=100, output_tokens=7, cache_read_tokens=30)
    meter = UsageMeter(name, stream=False)
    meter.feed(json.dumps(_answer(name, wire.usage_fields(written))).encode())
    read = meter.finish()
    assert (read.input_tokens, read.output_tokens, read.cache_read_tokens, read.seen) == \
        (100, 7, 30, True)


def test_usage_of_a_script_and_its_dict():
    u = Usage.of({"input_tokens": 5, "output_tokens": 2})
    assert u.as_dict() == {"input_tokens": 5, "output_tokens": 2, "cache_read_tokens": 0}
    assert Usage.of(None, u) is u and u.total == 7


def test_error_bodies_per_wire():
    body, headers = error_body("anthropic", 400, "budget", "spent")
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
    assert headers["x-should-retry"] == "false"
    body, _ = error_body("gemini", 429, "budget", "spent")
    assert json.loads(body)["error"]["status"] == "RESOURCE_EXHAUSTED"
    body, headers = error_body(None, 502, "upstream", "down")
    assert json.loads(body)["error"]["code"] == "upstream_unavailable"
    assert "x-should-retry" not in headers


def test_sse_joined_then_split_whole_and_in_pieces():
    raw = sse.event("a", {"x": 1}) + sse.event(None, "[DONE]")
    assert sse.looks_like(raw)
    assert sse.events(raw) == [("a", {"x": 1}), (None, "[DONE]")]
    lines = sse.DataLines()
    got = [obj for i in range(len(raw)) for obj in lines.feed(raw[i:i + 1])] + lines.finish()
    assert got == [{"x": 1}]


def test_requests_and_answers_as_typed_records():
    items = request_items("openai-chat", {"messages": [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a b"}]})
    assert [i.kind for i in items] == ["system", "user", "assistant", "tool_result"]
    assert items[2].tool_calls[0].arguments == {"command": "ls"} and items[3].call_id == "c1"
    raw = json.dumps({"content": [{"type": "text", "text": "ok"}], "model": "m",
                      "stop_reason": "end_turn", "usage": {"input_tokens": 3,
                                                          "output_tokens": 1}}).encode()
    turn = response_turn("anthropic", raw)
    assert (turn.text, turn.model, turn.stop, turn.usage.total) == ("ok", "m", "end_turn", 4)


@pytest.mark.parametrize("name", NAMES)
def test_each_wire_reads_the_scripted_drivers_conversation(name):
    conv = WIRES[name].conversation({}, "m", False)
    assert (conv.wire, conv.results, conv.tools) == (name, [], [])
