"""What the gateway answers itself: auth, model pinning, budgets, upstream failures; each in the
wire's own error shape, recorded, and the gateway still serving afterwards."""

from __future__ import annotations

import json

import pytest
from gateway_fakes import EXPECTED, MODEL, FakeProvider, free_port

from a2c.contracts.events import read_events, verify_events

WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]


def _events(gw, type_):
    return [e["data"] for e in read_events(gw.paths.events) if e["type"] == type_]


def _shape(wire, body, kind):
    """Assert `body` is the wire's error JSON; return the error's type/status string."""
    obj = json.loads(body)
    if wire == "anthropic":
        assert obj["type"] == "error" and set(obj["error"]) == {"type", "message"}
        return obj["error"]["type"]
    if wire == "gemini":
        assert set(obj["error"]) >= {"code", "message", "status"}
        return obj["error"]["status"]
    assert set(obj["error"]) == {"message", "type", "param", "code"}
    return obj["error"]["code"]


AUTH_KIND = {"anthropic": "authentication_error", "openai-chat": "invalid_api_key",
             "openai-responses": "invalid_api_key", "gemini": "UNAUTHENTICATED"}


@pytest.mark.parametrize("auth", ["x-api-key", "bearer", "x-goog-api-key", "query"])
def test_wrong_or_missing_key_is_refused(gateway_factory, fake, auth):
    gw = gateway_factory(fake.url)
    n = 0
    for wire in WIRES:
        for key in (None, "a2c-drv-wrong", gw.key[:-1]):
            status, _, body = gw.call(wire, key=key, auth=auth)
            n += 1
            assert status == 401
            assert _shape(wire, body, "auth") == AUTH_KIND[wire]
        assert gw.call(wire, auth=auth)[0] == 200       # the right key in the same style
        n += 1
    assert len(fake.requests) == len(WIRES)             # no refused request went upstream
    t = gw.totals(n)
    assert t["refused"] == n - len(WIRES) and t["calls"] == len(WIRES)
    refused = [c for c in _events(gw, "driver_call") if c["status"] == 401]
    assert len(refused) == n - len(WIRES) and all(c["error"] == "auth" for c in refused)


def test_model_is_pinned(gateway_factory, fake):
    gw = gateway_factory(fake.url, allow_models=["claude-haiku-4-5"])
    expect = {"anthropic": "invalid_request_error", "openai-chat": "model_not_found",
              "openai-responses": "model_not_found", "gemini": "INVALID_ARGUMENT"}
    for wire in WIRES:
        status, headers, body = gw.call(wire, model="gpt-4o")
        assert status == 400 and _shape(wire, body, "model") == expect[wire]
        assert "claude-sonnet-4-5" in json.loads(body)["error"]["message"]
    assert fake.requests == []
    assert gw.call("anthropic", model="claude-sonnet-4-5-20250929")[0] == 200  # dated snapshot
    assert gw.call("anthropic", model="claude-haiku-4-5")[0] == 200            # allow_models
    assert gw.call("anthropic", model="claude-sonnet-4-5-evil")[0] == 400
    t = gw.totals(7)
    assert t["calls"] == 2 and t["refused"] == 5


BUDGET_SHAPE = {"anthropic": (400, "invalid_request_error"),
                "openai-chat": (429, "insufficient_quota"),
                "openai-responses": (429, "insufficient_quota"),
                "gemini": (429, "RESOURCE_EXHAUSTED")}


def _budget(limit, wire):
    """A budget of two calls (calls), or one call's input estimate plus 4 output tokens
    (tokens, cost): the first call is admitted with its output cap lowered to 4, and what it
    metered leaves too little for the next one's input: (budget, calls allowed)."""
    from gateway_fakes import estimate, request_body

    from a2c.runtime.driver_gateway.prices import price_for
    if limit == "calls":
        return {"driver_calls": 2}, 2
    est = estimate(request_body(wire, False))
    if limit == "tokens":
        return {"driver_tokens": est + 4}, 1
    p = price_for(MODEL)
    return {"driver_cost_usd": (est * p.cache_write + 4 * p.output) / 1e6}, 1


@pytest.mark.parametrize("limit", ["calls", "tokens", "cost_usd"])
@pytest.mark.parametrize("wire", WIRES)
def test_budget_exhaustion(gateway_factory, fake, wire, limit):
    budget, allowed = _budget(limit, wire)
    gw = gateway_factory(fake.url, budget=budget)
    statuses = []
    for _ in range(allowed + 2):
        status, headers, body = gw.call(wire)
        statuses.append(status)
    assert statuses[:allowed] == [200] * allowed
    want_status, want_kind = BUDGET_SHAPE[wire]
    assert statuses[allowed:] == [want_status] * 2
    assert _shape(wire, body, "budget") == want_kind
    assert headers.get("x-should-retry") == "false"
    assert len(fake.requests) == allowed
    t = gw.totals(allowed + 2)
    assert t["calls"] == allowed and t["exhausted"]["limit"] == limit
    exhausted = _events(gw, "driver_budget_exhausted")
    assert len(exhausted) == 1 and exhausted[0]["limit"] == limit
    if limit != "calls":      # the first call's output cap was lowered to what was left
        assert fake.requests[0]["body"].get("max_tokens", 4) == 4
    errors = [c.get("error") for c in _events(gw, "driver_call")]
    assert errors == [None] * allowed + ["budget", "budget"]
    assert verify_events(gw.paths.events).ok


def test_budget_survives_a_restart(gateway_factory, fake):
    gw = gateway_factory(fake.url, budget={"driver_calls": 1})
    assert gw.call("anthropic")[0] == 200
    gw.totals(1)
    gw.conn.close()
    gw.proc.stop()
    gw.proc.start()
    assert gw.call("anthropic")[0] == 400
    t = gw.totals(2)
    assert t["calls"] == 1 and t["seq"] == 2
    assert [c["seq"] for c in _events(gw, "driver_call")] == [0, 1]


def test_upstream_500_is_passed_and_recorded(gateway_factory, fake):
    gw = gateway_factory(fake.url)
    fake.mode = "500"
    status, _, body = gw.call("openai-chat")
    assert status == 500 and json.loads(body)["error"]["message"] == "boom"
    assert gw.call("openai-chat")[0] == 200
    t = gw.totals(2)
    assert t["errors"] == 1 and t["calls"] == 2
    assert _events(gw, "driver_call")[0]["error"] == "upstream_status"


def test_upstream_timeout_is_504_in_the_wire_shape(gateway_factory, fake):
    gw = gateway_factory(fake.url, timeout_s=0.5)
    fake.slow_s = 0.9
    for wire in WIRES:
        fake.mode = "slow"
        status, _, body = gw.call(wire)
        assert status == 504
        assert _shape(wire, body, "timeout") in ("timeout_error", "timeout", "DEADLINE_EXCEEDED")
        assert gw.call(wire)[0] == 200                 # the next call works
    t = gw.totals(8)
    assert t["errors"] == 4 and t["calls"] == 8
    # a call the upstream never answered in time may have been generated: it is charged its
    # reservation (input estimate + output cap), flagged usage_missing
    from gateway_fakes import estimate, request_body

    from a2c.runtime.driver_gateway.admission import DEFAULT_OUTPUT_CAP
    charged = sum(estimate(request_body(w, False)) +
                  (request_body(w, False).get("max_tokens") or DEFAULT_OUTPUT_CAP)
                  for w in WIRES)
    assert t["tokens"] == sum(sum(EXPECTED[w]) for w in WIRES) + charged
    assert t["usage_missing_calls"] == 4
    calls = _events(gw, "driver_call")
    assert [c.get("error") for c in calls] == ["timeout", None] * 4
    assert [c.get("usage_missing") for c in calls] == [True, None] * 4


def test_upstream_refused_then_back(gateway_factory):
    port = free_port()
    gw = gateway_factory(f"http://127.0.0.1:{port}")
    for wire in WIRES:
        status, _, body = gw.call(wire)
        assert status == 502
        assert "unreachable" in json.loads(body)["error"]["message"]
    fake = FakeProvider(port)
    try:
        assert gw.call("anthropic")[0] == 200
        assert gw.proc.alive()
        t = gw.totals(5)
        assert t["errors"] == 4 and t["calls"] == 5 and t["tokens"] == sum(EXPECTED["anthropic"])
        assert [c.get("error") for c in _events(gw, "driver_call")] == ["upstream"] * 4 + [None]
    finally:
        fake.close()


def test_wire_not_served(gateway_factory, fake, provider_env, tmp_path):
    gw = gateway_factory(fake.url, wires=["anthropic"])
    status, _, body = gw.call("gemini")
    assert status == 404 and "does not serve the gemini wire" in body.decode()
    assert gw.call("anthropic")[0] == 200


def test_any_presented_key_style_may_carry_the_run_key(gateway_factory, fake):
    gw = gateway_factory(fake.url)
    status, _, _ = gw.call("anthropic", key="sk-ant-placeholder",
                           headers={"Authorization": f"Bearer {gw.key}"})
    assert status == 200
    sent = {k.lower(): v for k, v in fake.requests[-1]["headers"].items()}
    assert "authorization" not in sent and sent["x-api-key"] != "sk-ant-placeholder"


def test_stop_stale_after_a_runtime_crash(gateway_factory, fake):
    import time

    from a2c.runtime.driver_gateway import stop_stale
    gw = gateway_factory(fake.url)
    proc = gw.proc.proc
    stop_stale(gw.run_dir / "elsewhere")           # another run's folder: left alone
    time.sleep(0.2)
    assert proc.poll() is None
    stop_stale(gw.run_dir)
    assert proc.wait(timeout=10) == 0


def test_upstream_breaking_off_a_stream(gateway_factory, fake):
    """The agent sees an incomplete answer (no terminating chunk), not a short complete one."""
    import http.client

    from gateway_fakes import UnixHTTP
    gw = gateway_factory(fake.url)
    conn = UnixHTTP(gw.paths.driver_socket)
    fake.mode = "break"
    conn.request("POST", "/v1/messages", headers={"x-api-key": gw.key},
                 body=json.dumps({"model": MODEL, "stream": True, "messages": []}))
    resp = conn.getresponse()
    assert resp.status == 200
    with pytest.raises(http.client.IncompleteRead):
        resp.read()
    conn.close()
    assert gw.call("anthropic", True)[0] == 200
    t = gw.totals(2)
    calls = _events(gw, "driver_call")
    assert [c.get("error") for c in calls] == ["upstream_broken", None]
    assert t["calls"] == 2 and t["errors"] == 1
    # cut short after message_start: the provider may have generated up to the cap (none was
    # named: the default), so the call is charged at least its reservation: the output cap,
    # and the input estimate (the provider's cached count kept apart)
    from gateway_fakes import estimate

    from a2c.runtime.driver_gateway.admission import DEFAULT_OUTPUT_CAP
    assert calls[0]["usage_missing"] is True and calls[0]["output_tokens"] == DEFAULT_OUTPUT_CAP
    cached = EXPECTED["anthropic"][2] + EXPECTED["anthropic"][3]
    assert (calls[0]["cache_read_tokens"], calls[0]["cache_write_tokens"]) == \
        EXPECTED["anthropic"][2:]
    est = estimate({"model": MODEL, "stream": True, "messages": []})
    assert calls[0]["input_tokens"] == est - cached


def test_concurrent_calls_are_counted_once_and_the_calls_budget_holds(gateway_factory, fake):
    """Sixteen calls at once against a budget of five: exactly five reach the provider, the
    totals add up, and the hash chain of events.jsonl stays linear."""
    from concurrent.futures import ThreadPoolExecutor

    from gateway_fakes import UnixHTTP, request_body, wire_path
    gw = gateway_factory(fake.url, budget={"driver_calls": 5})

    def one(i):
        wire = WIRES[i % 4]
        conn = UnixHTTP(gw.paths.driver_socket)
        conn.request("POST", wire_path(wire, i % 2 == 0),
                     body=json.dumps(request_body(wire, i % 2 == 0)),
                     headers={"x-api-key": gw.key})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return wire, resp.status

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    ok = [w for w, s in results if s == 200]
    assert len(ok) == 5 and len(fake.requests) == 5
    t = gw.totals(16)
    assert t["calls"] == 5 and t["refused"] == 11
    assert t["tokens"] == sum(sum(EXPECTED[w]) for w in ok)
    assert len(_events(gw, "driver_call")) == 16
    assert len(_events(gw, "driver_budget_exhausted")) == 1
    assert verify_events(gw.paths.events).ok
