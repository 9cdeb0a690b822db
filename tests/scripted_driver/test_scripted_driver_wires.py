"""Every wire, streaming and not, answers well-formed replies with the script's usage."""

from __future__ import annotations

import json

import pytest
from sd_client import ask, fold_gemini_chunks, get, post, request_body
from sd_requests import WIRES, history, shell_tools

STOPS = {"anthropic": ("tool_use", "end_turn"), "openai-chat": ("tool_calls", "stop"),
         "openai-responses": ("completed", "completed"), "gemini": ("STOP", "STOP")}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_first_turn_is_a_shell_call_with_the_turns_usage(driver, wire, stream):
    body = request_body(wire, tools=shell_tools(wire), stream=stream,
                        stream_options={"include_usage": True} if wire == "openai-chat" else {})
    if wire == "openai-chat" and not stream:
        body.pop("stream_options")
    reply = ask(driver.base, wire, body, stream=stream)
    assert len(reply["calls"]) == 1
    name, args = reply["calls"][0]
    assert name == {"anthropic": "Bash", "openai-chat": "bash", "openai-responses": "shell",
                    "gemini": "run_shell_command"}[wire]
    assert args["command"] == "echo one"
    assert reply["usage"] == (11, 3, 5)
    assert reply["stop"] == STOPS[wire][0]
    entry = driver.entries[-1]
    assert entry["wire"] == wire and entry["stream"] is stream and entry["turn"] == 0
    assert entry["usage"] == {"input_tokens": 11, "output_tokens": 3, "cache_read_tokens": 5}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_say_is_a_plain_text_reply_that_ends_the_turn(driver, wire, stream):
    body = request_body(wire, messages=history(wire, ["1", "READY", "written"]),
                        tools=shell_tools(wire), stream=stream,
                        stream_options={"include_usage": True} if wire == "openai-chat" else {})
    reply = ask(driver.base, wire, body, stream=stream)
    assert reply["calls"] == [] and reply["text"] == "All done."
    assert reply["usage"] == (44, 6, 50)
    assert reply["stop"] == STOPS[wire][1]


@pytest.mark.parametrize("wire", WIRES)
def test_stream_and_whole_reply_say_the_same(driver, wire):
    def body(stream):
        return request_body(wire, messages=history(wire, ["1", "READY"]), tools=shell_tools(wire),
                            stream=stream, stream_options={"include_usage": True})
    whole = ask(driver.base, wire, body(False))
    streamed = ask(driver.base, wire, body(True), stream=True)
    for key in ("text", "calls", "usage", "stop"):
        assert whole[key] == streamed[key], key
    assert whole["text"] == "Writing the file."   # the write turn's text comes before its call


def test_chat_stream_has_no_usage_chunk_unless_asked(driver):
    body = request_body("openai-chat", tools=shell_tools("openai-chat"), stream=True)
    reply = ask(driver.base, "openai-chat", body, stream=True)
    assert reply["usage"] is None
    assert all("usage" not in chunk for _, chunk in reply["raw"][:-1])


def test_anthropic_stream_events_in_the_documented_order(driver):
    body = request_body("anthropic", messages=history("anthropic", ["1", "READY"]),
                        tools=shell_tools("anthropic"), stream=True)
    names = [n for n, _ in ask(driver.base, "anthropic", body, stream=True)["raw"]]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    # a text block then a tool_use block, each start, deltas, stop
    starts = [i for i, n in enumerate(names) if n == "content_block_start"]
    stops = [i for i, n in enumerate(names) if n == "content_block_stop"]
    assert len(starts) == len(stops) == 2 and starts[0] < stops[0] < starts[1] < stops[1]
    assert all(n == "content_block_delta" for n in names[starts[1] + 1:stops[1]])


def test_responses_stream_shape_codex_needs(driver):
    body = request_body("openai-responses", tools=shell_tools("openai-responses"), stream=True)
    events = ask(driver.base, "openai-responses", body, stream=True)["raw"]
    names = [n for n, _ in events]
    assert names == ["response.created", "response.in_progress", "response.output_item.added",
                     *["response.function_call_arguments.delta"] * (names.count(
                         "response.function_call_arguments.delta")),
                     "response.function_call_arguments.done", "response.output_item.done",
                     "response.completed"]
    item = events[-2][1]["item"]
    assert item["type"] == "function_call" and item["call_id"].startswith("call_")
    assert events[0][1]["response"]["status"] == "in_progress"
    assert events[-1][1]["response"]["usage"]["input_tokens"] == 16   # 11 + 5 cached


def test_gemini_stream_without_alt_sse_is_one_json_array(driver):
    body = request_body("gemini", tools=shell_tools("gemini"))
    reply = ask(driver.base, "gemini", body, stream=True, alt_sse=False)
    assert isinstance(reply["raw"], list) and reply["calls"][0][1] == {"command": "echo one"}
    assert reply["usage"] == (11, 3, 5)


def test_gemini_usage_only_on_the_last_chunk(driver):
    body = request_body("gemini", messages=history("gemini", ["1", "READY", "w"]),
                        tools=shell_tools("gemini"))
    events = ask(driver.base, "gemini", body, stream=True)["raw"]
    chunks = [d for _, d in events]
    assert ["usageMetadata" in c for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert len(chunks) > 1 and fold_gemini_chunks(chunks)["text"] == "All done."


@pytest.mark.parametrize("prefix", ["", "/anthropic", "/api/proxy"])
def test_any_path_prefix_before_the_api_path(driver, prefix):
    status, _, raw = post(driver.base, prefix + "/v1/messages",
                          request_body("anthropic", tools=shell_tools("anthropic")))
    assert status == 200 and json.loads(raw)["content"][0]["name"] == "Bash"


def test_count_tokens_and_models_and_unknown_paths(driver):
    status, _, raw = post(driver.base, "/v1/messages/count_tokens",
                          {"model": "m", "messages": [{"role": "user", "content": "hello"}]})
    assert status == 200 and json.loads(raw)["input_tokens"] >= 1
    status, _, raw = post(driver.base, "/v1beta/models/g:countTokens", {"contents": []})
    assert status == 200 and "totalTokens" in json.loads(raw)
    status, models = get(driver.base, "/v1/models")
    assert status == 200 and models["data"][0]["id"] == "claude-sonnet-4-5"
    assert models["models"][0]["name"] == "models/claude-sonnet-4-5"
    status, _, raw = post(driver.base, "/v1/responses/input_tokens", {"model": "m", "input": "hi"})
    assert status == 200 and json.loads(raw)["input_tokens"] >= 1
    for path in ("/v1/nothing", "/v1/messages/batches", "/v1/files"):   # the gateway's routes
        status, _, raw = post(driver.base, path, {})
        assert status == 404, path
    assert driver.entries == []          # none of these is a model reply


def test_bad_json_gets_the_wires_error_shape(driver):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", driver.port, timeout=5)
    conn.request("POST", "/v1/messages", body=b"{not json", headers={"Content-Length": "9"})
    resp = conn.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 400 and body["type"] == "error" and "cannot read" in \
        body["error"]["message"]


def test_reply_echoes_the_requested_model(driver):
    body = request_body("openai-chat", tools=shell_tools("openai-chat"), model="gpt-x")
    assert ask(driver.base, "openai-chat", body)["raw"]["model"] == "gpt-x"
    assert driver.entries[-1]["model"] == "gpt-x"
