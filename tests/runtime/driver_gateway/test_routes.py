"""The allow-lists and the admission arithmetic, without a process: which request targets and
headers may go upstream, what a forwarded body carries, and how a reservation is cut to a
budget."""

from __future__ import annotations

import pytest

from a2c.runtime.driver_gateway import admission
from a2c.runtime.driver_gateway.gateway_config import DriverLimits, GatewayConfig
from a2c.runtime.driver_gateway.ledger import Ledger
from a2c.runtime.driver_gateway.prices import pinned_models, price_for
from a2c.runtime.driver_gateway.routes import Refused, Target, check_target, forward_headers
from a2c.wires import generation_call, route

M = "claude-sonnet-4-5"


@pytest.mark.parametrize("method,target,forward,kind", [
    ("POST", "/v1/messages", "/v1/messages", "generate"),
    ("POST", "/v1/messages?beta=true", "/v1/messages?beta=true", "generate"),
    ("POST", "/messages", "/v1/messages", "generate"),
    ("POST", "/v1/messages/count_tokens?beta=true", "/v1/messages/count_tokens?beta=true",
     "count"),
    ("POST", "/v1/chat/completions", "/v1/chat/completions", "generate"),
    ("POST", "/chat/completions", "/v1/chat/completions", "generate"),
    ("POST", "/v1/responses", "/v1/responses", "generate"),
    ("POST", "/v1/responses/input_tokens", "/v1/responses/input_tokens", "count"),
    ("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse&key=K",
     "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "generate"),
    ("POST", "/models/gemini-2.5-pro:countTokens", "/v1beta/models/gemini-2.5-pro:countTokens",
     "count"),
    ("GET", "/v1/models", "/v1/models", "models"),
    ("GET", "/v1beta/models/gemini-2.5-pro", "/v1beta/models/gemini-2.5-pro", "models"),
])
def test_served_targets(method, target, forward, kind):
    got = check_target(method, target)
    assert isinstance(got, Target) and got.path == forward and got.route.kind == kind
    assert got.query_key == ("K" if "key=K" in target else None)


@pytest.mark.parametrize("method,target,status", [
    ("POST", "/v1/messages/batches", 404),
    ("POST", "/v1/messages/batches/msgbatch_1/cancel", 404),
    ("POST", f"/v1beta/models/{M}:batchGenerateContent", 404),
    ("POST", "/v1beta/tunedModels/x:generateContent", 404),
    ("POST", "/v1alpha/models/x:generateContent", 404),
    ("DELETE", "/v1/models/x", 404),
    ("GET", "/v1/messages", 404),
    ("POST", "/v1/files", 404),
    ("POST", "/v1/../v1/files", 400),
    ("POST", "/v1/./messages", 400),
    ("POST", "/v1/.../messages", 400),
    ("POST", "/v1//messages", 400),
    ("POST", "/v1/messages/", 400),
    ("POST", "/v1/%2e%2e/files", 400),
    ("POST", "/v1/%2E%2E/files", 400),
    ("POST", "/v1/messages%2fbatches", 400),
    ("POST", "/v1/messages%252Fbatches", 400),
    ("POST", "/v1/messages%5cbatches", 400),
    ("POST", "/v1\\messages", 400),
    ("POST", "/v1/messages\x00", 400),
    ("POST", "v1/messages", 400),
    ("POST", "http://evil/v1/messages", 400),
    ("POST", "//evil/v1/messages", 400),
    ("POST", "/v1beta/models/..:generateContent", 404),
    ("POST", "/v1beta/models/../x:generateContent", 400),
    ("POST", "/v1beta/models/.hidden:generateContent", 404),
    ("POST", "/v1beta/models/a:b:generateContent", 404),
    ("POST", "/v1/messages?beta=false", 400),
    ("POST", "/v1/messages?beta=true&beta=true", 400),
    ("POST", "/v1/messages?x-api-key=1", 400),
    ("POST", "/v1/chat/completions?api-version=2024", 400),
    ("POST", "/v1/messages?beta=%74rue", 400),
    ("POST", "/v1beta/models/m:generateContent?alt=sse&upload_protocol=raw", 400),
])
def test_refused_targets(method, target, status):
    got = check_target(method, target)
    assert isinstance(got, Refused) and got.status == status, got
    assert got.kind == ("bad_request" if status == 400 else "not_served")
    assert "?" not in got.path


def test_analysis_reads_recorded_paths_the_same_way():
    assert route("/v1/messages").generation and not route("/v1/messages/count_tokens").generation
    assert route("/v1/messages/batches").wire is None
    assert generation_call(None, "/chat/completions")
    assert not generation_call("anthropic", "/v1/messages/batches")


def test_headers_are_an_allow_list():
    got = forward_headers([("Content-Type", "application/json"), ("X-Forwarded-Host", "e"),
                           ("OpenAI-Organization", "org"), ("Authorization", "Bearer x"),
                           ("anthropic-beta", "files-api-2025-04-14, claude-code-20250219"),
                           ("anthropic-beta", "mcp-client-2025-04-04"),
                           ("Anthropic-Beta", "interleaved-thinking-2025-05-14"),
                           ("Host", "evil"), ("User-Agent", "ua")])
    assert got == {"content-type": "application/json", "user-agent": "ua",
                   "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}


@pytest.mark.parametrize("wire,body,cap,n", [
    ("anthropic", {"max_tokens": 100}, 100, 1),
    ("openai-chat", {"max_tokens": 100, "max_completion_tokens": 50, "n": 3}, 50, 3),
    ("openai-chat", {}, None, 1),
    ("openai-responses", {"max_output_tokens": 70}, 70, 1),
    ("gemini", {"generationConfig": {"maxOutputTokens": 9, "candidateCount": 2}}, 9, 2),
    ("gemini", {"generation_config": {"max_output_tokens": 9}}, 9, 1),
    ("openai-chat", {"max_tokens": None, "n": None}, None, 1),
    ("openai-chat", {"max_tokens": 10, "n": 2, "best_of": 5}, 10, 5),
])
def test_output_cap(wire, body, cap, n):
    assert admission.output_cap(wire, body) == (cap, n)


@pytest.mark.parametrize("wire,body,field", [
    ("anthropic", {"max_tokens": True}, "max_tokens"),
    ("anthropic", {"max_tokens": 10.0}, "max_tokens"),
    ("anthropic", {"max_tokens": 0}, "max_tokens"),
    ("openai-chat", {"n": 8.0}, "n"),
    ("openai-chat", {"max_completion_tokens": "90000"}, "max_completion_tokens"),
    ("gemini", {"generationConfig": {"candidateCount": "8"}}, "candidateCount"),
])
def test_output_cap_refuses_what_is_not_one_integer(wire, body, field):
    from a2c.wires.strict import Unreadable
    with pytest.raises(Unreadable, match=field):
        admission.output_cap(wire, body)


def test_forward_body_lowers_the_cap_and_forces_chat_usage():
    body = {"stream": True, "stream_options": {"include_usage": False}, "max_tokens": 900}
    out = admission.forward_body("openai-chat", body, True, 300, 900, False)
    assert out["stream_options"] == {"include_usage": True} and out["max_tokens"] == 300
    assert admission.forward_body("openai-chat", {"stream": False}, False, 300, None,
                                  False) is None
    out = admission.forward_body("openai-chat", {}, False, 300, None, True)
    assert out == {"max_completion_tokens": 300}
    out = admission.forward_body("gemini", {}, True, 5, None, True)
    assert out == {"generationConfig": {"maxOutputTokens": 5}}
    thinking = {"max_tokens": 8000, "thinking": {"type": "enabled", "budget_tokens": 4000}}
    out = admission.forward_body("anthropic", thinking, True, 3000, 8000, True)
    assert out["max_tokens"] == 3000 and out["thinking"]["budget_tokens"] == 2999
    out = admission.forward_body("anthropic", {"max_tokens": 8000, "thinking": {
        "type": "enabled", "budget_tokens": 4000}}, True, 900, 8000, True)
    assert out == {"max_tokens": 900}


def _ledger(tmp_path, **budget):
    return Ledger(tmp_path, GatewayConfig(
        driver="x", model=M, price=price_for(M),
        budget=DriverLimits(**budget)))


def test_reservations_share_the_budget(tmp_path):
    led = _ledger(tmp_path, driver_tokens=10_000)
    first = led.admit(100, 6000)
    second = led.admit(100, 6000)
    assert first.output_cap == 6000 and second.output_cap == 10_000 - 6100 - 100
    assert led.admit(100, 6000) == ("tokens", 10_000, 0)       # nothing left, nothing settles
    led.release(first)
    third = led.admit(100, 6000)
    assert third.output_cap == 6000
    led.close()


def test_admission_waits_for_calls_in_flight(tmp_path):
    import threading
    led = _ledger(tmp_path, driver_tokens=1000)
    first = led.admit(10, 990)
    assert led.admit(10, 900).__class__ is tuple               # no wait asked: refused
    threading.Timer(0.2, led.release, (first,)).start()
    second = led.admit(10, 900, wait_s=10)
    assert second.output_cap == 900
    led.close()


def test_cost_reservation_uses_the_dearest_input_rate(tmp_path):
    p = price_for(M)
    led = _ledger(tmp_path, driver_cost_usd=(1000 * p.cache_write + 50 * p.output) / 1e6)
    assert led.admit(1000, 4000).output_cap == 50
    led.close()


def test_pinned_models_are_explicit():
    assert pinned_models("claude-opus-4") == ["claude-opus-4", "claude-opus-4-0",
                                              "claude-opus-4-20250514"]
    assert pinned_models("claude-sonnet-4-5-20250929") == ["claude-sonnet-4-5-20250929",
                                                           "claude-sonnet-4-5"]
    assert pinned_models("Qwen/Qwen3-8B", ["gpt-5"]) == ["Qwen/Qwen3-8B", "gpt-5",
                                                         "gpt-5-2025-08-07"]
