"""The turn is a function of the request only: model turns in the history, until-holding, side
requests that consume nothing, the end of the script, and the same reply to the same request."""

from __future__ import annotations

import pytest
from sd_client import ask, request_body
from sd_requests import WIRES, history, shell_tools

from a2c.agents.scripted_driver import parse
from a2c.agents.scripted_driver.player import END_TEXT, position


def _ask(driver, wire, results, **kw):
    body = request_body(wire, messages=history(wire, results), tools=shell_tools(wire), **kw)
    return ask(driver.base, wire, body)


@pytest.mark.parametrize("wire", WIRES)
def test_position_is_the_number_of_model_turns_in_the_history(driver, wire):
    assert _ask(driver, wire, [])["calls"][0][1]["command"] == "echo one"
    assert _ask(driver, wire, ["one"])["calls"][0][1]["command"] == "cat status.txt"
    third = _ask(driver, wire, ["one", "READY"])
    assert "cat > /tmp/out.txt" in third["calls"][0][1]["command"]     # no write tool: heredoc
    assert _ask(driver, wire, ["one", "READY", "ok"])["text"] == "All done."
    assert [e["turn"] for e in driver.entries] == [0, 1, 2, 3]


@pytest.mark.parametrize("wire", WIRES)
def test_until_holds_the_turn_while_the_result_does_not_match(driver, wire):
    held = _ask(driver, wire, ["one", "not yet", "still waiting"])
    # the third play of the polling turn: the same command, numbered (no identical repeats)
    assert held["calls"][0][1]["command"] == "cat status.txt\n# poll 3"
    assert driver.entries[-1]["turn"] == 1 and driver.entries[-1]["repeat"] == 2
    moved_on = _ask(driver, wire, ["one", "not yet", "READY now"])
    assert "cat > /tmp/out.txt" in moved_on["calls"][0][1]["command"]


def test_max_repeats_bounds_the_hold(driver):
    # max_repeats 4: plays 1..4 of the polling turn, then the script moves on regardless
    first = _ask(driver, "anthropic", ["one"])
    assert first["calls"][0][1]["command"] == "cat status.txt"
    fourth = _ask(driver, "anthropic", ["one", "no", "no", "no"])
    assert fourth["calls"][0][1]["command"] == "cat status.txt\n# poll 4"
    fifth = _ask(driver, "anthropic", ["one", "no", "no", "no", "no"])
    assert "cat > /tmp/out.txt" in fifth["calls"][0][1]["command"]


def test_position_rule_directly():
    script = parse("apiVersion: a2c/v1\nkind: DriverScript\nid: p\nturns:\n"
                   "  - run: a\n  - run: b\n    until: ^ok$\n  - say: end\n")
    assert position(script, []) == (0, 0)
    assert position(script, ["x"]) == (1, 0)
    assert position(script, ["x", "nope"]) == (1, 1)
    assert position(script, ["x", "nope", "ok"]) == (2, 0)
    assert position(script, ["x", "ok", "y", "z"]) == (4, 0)      # past the end


@pytest.mark.parametrize("wire", WIRES)
def test_requests_without_tools_are_side_replies_that_consume_no_turn(driver, wire):
    body = request_body(wire, messages=history(wire, ["one"]))      # no tools
    side = ask(driver.base, wire, body)
    assert side["calls"] == [] and side["text"] == "A title" and side["usage"] == (7, 2, 0)
    assert driver.entries[-1]["kind"] == "side" and driver.entries[-1]["turn"] is None
    # the next real request is still turn 1
    assert _ask(driver, wire, ["one"])["calls"][0][1]["command"] == "cat status.txt"


def test_gemini_json_side_request_gets_json(driver):
    body = request_body("gemini", generationConfig={"responseMimeType": "application/json"})
    import json
    answer = json.loads(ask(driver.base, "gemini", body)["text"])
    assert answer["next_speaker"] == "user"


@pytest.mark.parametrize("wire", WIRES)
def test_past_the_end_the_session_is_closed_at_no_cost(driver, wire):
    reply = _ask(driver, wire, ["one", "READY", "ok", "done"])
    assert reply["text"] == END_TEXT and reply["calls"] == [] and reply["usage"] == (0, 0, 0)
    assert driver.entries[-1]["kind"] == "end"


@pytest.mark.parametrize("wire", WIRES)
def test_same_request_same_reply_ids_included(driver, wire):
    first = _ask(driver, wire, ["one", "no"])["raw"]
    again = _ask(driver, wire, ["one", "no"])["raw"]
    drop = ("created", "created_at")
    assert {k: v for k, v in first.items() if k not in drop} == \
        {k: v for k, v in again.items() if k not in drop}
    other = _ask(driver, wire, ["one", "no", "no"])["raw"]          # a repeat gets new ids
    assert str(other) != str(first)


def test_split_assistant_messages_count_as_one_turn(driver):
    """Scaffolds that send a reply's text and its tool call as two assistant messages."""
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": "thinking"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                                   "input": {"command": "echo one"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                              "content": "one"}]}]
    body = request_body("anthropic", messages=messages, tools=shell_tools("anthropic"))
    assert ask(driver.base, "anthropic", body)["calls"][0][1]["command"] == "cat status.txt"


def test_log_sums_equal_the_usage_the_wire_reported(driver, tmp_path):
    import json
    seen = []
    for wire in WIRES:
        for results in ([], ["one"], ["one", "READY"]):
            body = request_body(wire, messages=history(wire, results), tools=shell_tools(wire),
                                stream=True, stream_options={"include_usage": True})
            seen.append(ask(driver.base, wire, body, stream=True)["usage"])
        seen.append(ask(driver.base, wire, request_body(wire))["usage"])    # a side request
    lines = [json.loads(line) for line in (tmp_path / "driver.jsonl").read_text().splitlines()]
    assert len(lines) == len(seen) == 16
    for key, index in (("input_tokens", 0), ("output_tokens", 1), ("cache_read_tokens", 2)):
        assert sum(e["usage"][key] for e in lines) == sum(u[index] for u in seen)
    assert sum(e["usage"]["input_tokens"] for e in lines) == 4 * (11 + 22 + 100 + 7)
