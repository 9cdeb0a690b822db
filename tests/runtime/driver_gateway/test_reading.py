"""One reading of a request (issue 32), without a process: the strict parse, the canonical
serialization, each wire's cost fields, the input bound, what a cut call is charged, and the
stop that records every call in flight."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from a2c.runtime.driver_gateway import admission
from a2c.runtime.driver_gateway.admission import Reservation, input_estimate
from a2c.runtime.driver_gateway.flights import CutError, Flight, Flights, Forwarded
from a2c.wires import Usage, normalize, route, strict
from a2c.wires.strict import Unreadable

FIXTURES = Path(__file__).resolve().parents[2] / "scripted_driver" / "fixtures"


@pytest.mark.parametrize("raw,why", [
    (b'{"model":"a","model":"b"}', "appears twice"),
    (b'{"a":[{"b":{"c":1,"c":1}}]}', "appears twice"),        # at depth, even equal values
    (b'{"max_tokens":NaN}', "NaN"),
    (b'{"t":Infinity}', "Infinity"),
    (b'{"t":-Infinity}', "Infinity"),
    (b'{"t":1e999}', "out of range"),
    (b'{"t":"\xff"}', "not UTF-8"),
    (b'\xef\xbb\xbf{"t":1}', "not JSON"),                       # a BOM
    (b'{"t":1} {"t":2}', "not JSON"),
    (b'{"t":' + b"9" * 5000 + b"}", "not JSON"),
    (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
])
def test_strict_read_refuses_what_has_no_single_reading(raw, why):
    with pytest.raises(Unreadable, match=why):
        strict.read(raw)


def test_strict_read_and_encode_round_trip():
    raw = '{ "b" : [1, 2.5, true, null], "a": "caf\\u00e9 数据", "s": "\\ud83d" }'.encode()
    obj = strict.read(raw)
    assert obj == json.loads(raw)
    out = strict.encode(obj)
    # a lone surrogate is not UTF-8: the whole body goes out with ASCII escapes
    assert out == b'{"b":[1,2.5,true,null],"a":"caf\\u00e9 \\u6570\\u636e","s":"\\ud83d"}'
    assert json.loads(out) == obj
    assert strict.encode({"a": "数据"}) == '{"a":"数据"}'.encode()


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_real_scaffold_requests_pass(fixture):
    """Requests captured from Claude Code, Codex, Gemini CLI, OpenCode and mini-swe-agent read
    strictly, pass their wire's cost checks, and serialize back to the same object."""
    capture = json.loads((FIXTURES / fixture).read_text())
    rt = route(normalize(capture["path"].split("?")[0]))
    raw = json.dumps(capture["body"], indent=1).encode()
    body = strict.read(raw)
    reading = admission.read_request(rt.wire, body)
    assert reading.candidates == 1 and reading.images == reading.long_media == 0
    out = strict.encode(body)
    assert json.loads(out) == capture["body"]
    assert input_estimate(out, reading) >= len(out)


DENSE = ["\U00020000" * 1000, "😀" * 1000, "数据" * 500, "\x00\x01" * 500, "a" * 1000]


@pytest.mark.parametrize("text", DENSE, ids=["cjk-ext-b", "emoji", "cjk", "controls", "ascii"])
def test_the_input_bound_is_at_least_the_texts_utf8_bytes(text):
    """No byte-level tokenizer yields more tokens than the UTF-8 bytes of the text, and the
    estimate is at least those bytes, whatever the escapes in the agent's JSON."""
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    for raw in (json.dumps(body).encode(), json.dumps(body, ensure_ascii=False).encode()):
        forwarded = strict.encode(strict.read(raw))
        assert input_estimate(forwarded) >= len(text.encode("utf-8"))


def test_media_are_reserved_by_kind_not_by_their_bytes():
    png = "data:image/png;base64," + "A" * 400_000
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": png}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,QUJD"}},
        {"type": "text", "text": "what is this"}]}]}
    reading = admission.read_request("openai-chat", body)
    assert (reading.images, reading.long_media) == (1, 1)
    est = input_estimate(strict.encode(body), reading)
    assert est == (len(strict.encode(body)) - len(png) - len("data:application/pdf;base64,QUJD")
                   + admission.IMAGE_TOKENS + admission.LONG_MEDIA_TOKENS +
                   admission.ADDED_TOKENS)
    anthropic = {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "AAAA"}}]}]}], "max_tokens": 5}
    assert admission.read_request("anthropic", anthropic).images == 1
    gemini = {"contents": [{"parts": [{"inline_data": {"mime_type": "audio/ogg",
                                                       "data": "AAAA"}}]}]}
    assert admission.read_request("gemini", gemini).long_media == 1
    assert "inlineData" in gemini["contents"][0]["parts"][0]          # one spelling forwarded


def test_chat_caps_named_twice_are_forwarded_as_the_one_reserved():
    body = {"max_tokens": 900, "max_completion_tokens": 50}
    reading = admission.read_request("openai-chat", body)
    assert reading.cap == 50
    assert admission.apply_cap("openai-chat", body, 50, reading.cap, False)
    assert body == {"max_tokens": 50, "max_completion_tokens": 50}
    same = {"max_tokens": 50}
    assert not admission.apply_cap("openai-chat", same, 50, 50, True)


def test_a_cut_call_is_charged_at_least_its_reservation():
    res = Reservation(input_tokens=1000, output_cap=300, candidates=2)
    nothing = res.charge(Usage(model="m"))
    assert (nothing.input_tokens, nothing.output_tokens, nothing.model) == (1000, 600, "m")
    seen = res.charge(Usage(input_tokens=100, cache_read_tokens=700, output_tokens=5,
                            seen=True))
    assert (seen.input_tokens, seen.cache_read_tokens, seen.output_tokens) == (300, 700, 600)
    assert seen.total >= res.tokens
    more = res.charge(Usage(input_tokens=5000, output_tokens=900, seen=True))
    assert (more.input_tokens, more.output_tokens) == (5000, 900)


def test_the_stop_records_a_call_its_handler_never_finished():
    flights = Flights()
    a, b = socket.socketpair()
    stuck = Flight(a, Forwarded(path="/v1/messages"))
    flights.start(stuck)
    recorded = []
    assert flights.stop(recorded.append, upstream_grace=0.05, client_grace=0.05) == 1
    assert recorded == [stuck] and stuck.cut and not stuck.claim()
    assert len(flights) == 0
    with pytest.raises(CutError):                        # nothing starts after the stop
        flights.start(Flight(a, Forwarded()))
    with pytest.raises(CutError):                        # nor goes over a cut flight
        stuck.attach(object())
    assert b.recv(1) == b""                               # the agent's side was shut
    a.close()
    b.close()


def test_a_flight_sees_its_agent_leave():
    a, b = socket.socketpair()
    flight = Flight(a, Forwarded())
    assert not flight.client_left()
    b.close()
    assert flight.client_left()
    a.close()


class _Room:
    """A ledger with `room` tokens: admits a call whose input fits, else refuses (tokens)."""

    def __init__(self, room):
        self.room, self.asked, self.spent = room, [], None

    def admit(self, est, cap, candidates, wait_s=0.0):
        self.asked.append(est)
        if est >= self.room:
            return ("tokens", self.room, 0)
        return Reservation(est, min(cap, self.room - est), candidates)

    def exhausted(self, limit, cap, used):
        self.spent = limit

    def could_fit(self, est, candidates=1):
        return est < self.room


def test_admission_asks_the_providers_count_only_where_the_bound_does_not_fit():
    body = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "x" * 8000}]}
    reading = admission.read_request("anthropic", body)
    bound = input_estimate(strict.encode(body), reading)
    asked = []

    def count():
        asked.append(1)
        return 2000

    roomy = _Room(bound + 500)
    res, forward = admission.admit(roomy, "anthropic", body, reading, False, 0, True, count)
    assert res.input_tokens == bound and asked == [] and forward == strict.encode(body)
    tight = _Room(bound - 10)
    res, _ = admission.admit(tight, "anthropic", dict(body), reading, False, 0, True, count)
    assert asked == [1] and res.input_tokens == admission.counted_estimate(2000, bound)
    assert res.input_tokens == 2000 + 100 + admission.ADDED_TOKENS
    # a count that fails, or one no better than the bound, leaves the refusal
    for failed in (lambda: None, lambda: 10**9):
        ledger = _Room(bound - 10)
        got = admission.admit(ledger, "anthropic", dict(body), reading, False, 0, True, failed)
        assert isinstance(got, str) and ledger.spent == "tokens" and len(ledger.asked) == 1
    # a budget with no room for any call is not counted for
    asked.clear()
    spent = _Room(admission.ADDED_TOKENS)
    assert isinstance(admission.admit(spent, "anthropic", dict(body), reading, False, 0, True,
                                      count), str)
    assert asked == []


def test_count_requests_leave_out_what_shapes_the_answer_only():
    from a2c.wires import WIRES
    body = {"model": "m", "max_tokens": 5, "stream": True, "temperature": 1, "system": "s",
            "messages": [], "tools": [], "thinking": {"type": "enabled", "budget_tokens": 2}}
    path, counted = WIRES["anthropic"].count_request(body, "/v1/messages?beta=true")
    assert path == "/v1/messages/count_tokens?beta=true"
    assert set(counted) == {"model", "system", "messages", "tools", "thinking"}
    path, counted = WIRES["openai-responses"].count_request(
        {"model": "m", "input": "hi", "store": False, "include": [], "max_output_tokens": 5,
         "instructions": "i", "reasoning": {"effort": "low"}}, "/v1/responses")
    assert path == "/v1/responses/input_tokens"
    assert set(counted) == {"model", "input", "instructions", "reasoning"}
    path, counted = WIRES["gemini"].count_request(
        {"contents": []}, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse")
    assert path == "/v1beta/models/gemini-2.5-pro:countTokens"
    assert counted == {"generateContentRequest": {"model": "models/gemini-2.5-pro",
                                                  "contents": []}}
    assert WIRES["openai-chat"].count_request({"model": "m"}, "/v1/chat/completions") is None
    assert WIRES["gemini"].count_of({"totalTokens": 7}) == 7
    assert WIRES["anthropic"].count_of({"input_tokens": "7"}) is None
