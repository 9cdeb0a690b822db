"""Each wire passes through the gateway, JSON and SSE, with the provider's usage counted exactly,
priced from the table, and the provider key swapped in for the run key."""

from __future__ import annotations

import json

import pytest
from gateway_fakes import EXPECTED, MODEL, PROVIDER_KEY, USAGE, json_answer

from a2c.contracts.events import read_events, verify_events
from a2c.runtime.driver_gateway.prices import cost_usd, price_for

WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]
AUTH = {"anthropic": "x-api-key", "openai-chat": "bearer", "openai-responses": "bearer",
        "gemini": "x-goog-api-key"}


def _price(wire):
    return cost_usd(price_for(MODEL), *EXPECTED[wire])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_each_wire_passes_through_and_is_metered(gateway_factory, fake, stream):
    gw = gateway_factory(fake.url)
    for wire in WIRES:
        status, headers, body = gw.call(wire, stream, auth=AUTH[wire])
        assert status == 200, body
        if stream:
            assert headers["Content-Type"].startswith("text/event-stream")
            assert body.count(b"data:") >= 2
        else:
            assert json.loads(body) == json_answer(wire, MODEL)
        seen = fake.requests[-1]["headers"]
        # the provider key went upstream in the wire's own header; the run key did not
        lowered = {k.lower(): v for k, v in seen.items()}
        assert gw.key not in json.dumps(seen)
        assert PROVIDER_KEY in (lowered.get("x-api-key", ""), lowered.get("x-goog-api-key", ""),
                                lowered.get("authorization", "").removeprefix("Bearer "))
    t = gw.totals(4)
    assert t["calls"] == 4
    assert t["input_tokens"] == sum(EXPECTED[w][0] for w in WIRES)
    assert t["output_tokens"] == sum(EXPECTED[w][1] for w in WIRES)
    assert t["cache_read_tokens"] == sum(EXPECTED[w][2] for w in WIRES)
    assert t["cache_write_tokens"] == sum(EXPECTED[w][3] for w in WIRES)
    assert t["tokens"] == sum(sum(EXPECTED[w]) for w in WIRES)
    assert t["cost_usd"] == pytest.approx(sum(_price(w) for w in WIRES), rel=1e-9)
    assert t["by_model"][MODEL]["calls"] == 4
    calls = [e["data"] for e in read_events(gw.paths.events) if e["type"] == "driver_call"]
    assert [c["wire"] for c in calls] == WIRES
    for c in calls:
        w = c["wire"]
        assert (c["input_tokens"], c["output_tokens"], c["cache_read_tokens"],
                c["cache_write_tokens"]) == EXPECTED[w]
        assert c["cost_usd"] == pytest.approx(_price(w))
        assert c["stream"] is stream and c["status"] == 200 and c["model"] == MODEL
        assert c["response_model"] == MODEL and c["latency_ms"] >= 0
    assert verify_events(gw.paths.events).ok


def test_openai_stream_gets_usage_injected(gateway_factory, fake):
    """A chat stream that did not ask for usage still gets metered: the gateway adds
    stream_options.include_usage, so the provider's final chunk carries it."""
    gw = gateway_factory(fake.url)
    status, _, body = gw.call("openai-chat", True, auth="bearer")
    assert status == 200 and b'"usage"' in body
    assert fake.requests[-1]["body"]["stream_options"] == {"include_usage": True}
    t = gw.totals(1)
    assert (t["input_tokens"], t["output_tokens"], t["cache_read_tokens"]) == (16, 9, 4)


def test_stream_is_not_buffered(gateway_factory, fake):
    """The first SSE event reaches the agent while the provider is still holding the rest."""
    import threading
    fake.hold = threading.Event()
    gw = gateway_factory(fake.url)
    gw.conn.request("POST", "/v1/messages", headers={"x-api-key": gw.key,
                                                     "Content-Type": "application/json"},
                    body=json.dumps({"model": MODEL, "stream": True, "messages": []}))
    resp = gw.conn.getresponse()
    first = resp.read1(65536)
    assert b"message_start" in first and b"message_stop" not in first
    fake.hold.set()
    rest = resp.read()
    assert b"message_stop" in rest
    assert gw.totals(1)["output_tokens"] == USAGE["anthropic"]["output_tokens"]


def test_blobs_are_content_addressed_and_hold_no_key(gateway_factory, fake):
    import hashlib
    gw = gateway_factory(fake.url)
    for wire, auth in AUTH.items():
        gw.call(wire, True, auth=auth)
    gw.call("gemini", False, auth="query")
    gw.call("anthropic", False, key="wrong-key")
    gw.totals(6)
    calls = [e["data"] for e in read_events(gw.paths.events) if e["type"] == "driver_call"]
    assert len(calls) == 6
    for c in calls:
        for field in ("request_sha256", "response_sha256"):
            blob = gw.paths.driver_blobs / c[field]
            assert hashlib.sha256(blob.read_bytes()).hexdigest() == c[field]
            assert blob.stat().st_mode & 0o777 == 0o600
        req = json.loads((gw.paths.driver_blobs / c["request_sha256"]).read_bytes())
        assert isinstance(req, dict)
    assert "key=" not in calls[4]["path"]
    # the provider key is nowhere in the run directory; the run key only in gateway.key
    for path in gw.run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert PROVIDER_KEY.encode() not in data, path
            if path != gw.paths.driver_key:
                assert gw.key.encode() not in data, path
    config = json.loads(gw.paths.driver_config.read_text())
    assert config["upstream"]["key_env"] == "FAKE_PROVIDER_KEY"
    assert gw.paths.driver_config.stat().st_mode & 0o777 == 0o600
    assert gw.paths.driver_key.stat().st_mode & 0o777 == 0o600


def test_non_generation_paths_pass_unmetered(gateway_factory, fake):
    gw = gateway_factory(fake.url)
    status, _, body = gw.call("openai-chat", path="/v1/models", method="GET", auth="bearer")
    assert status == 200 and json.loads(body)["data"][0]["id"] == MODEL
    t = gw.totals(1)
    assert t["calls"] == 0 and t["tokens"] == 0


def test_health_and_probe(gateway_factory, fake):
    from a2c.runtime.driver_gateway import probe
    gw = gateway_factory(fake.url)
    ok, message = probe(gw.paths.driver_socket, gw.key)
    assert ok and MODEL in message and "anthropic" in message
    ok, message = probe(gw.paths.driver_socket, "nope")
    assert not ok and "401" in message
    gw.proc.stop()
    ok, message = probe(gw.paths.driver_socket, gw.key)
    assert not ok and "does not answer" in message


def test_agent_env_and_log(gateway_factory, fake):
    from a2c.runtime.driver_gateway import agent_env
    gw = gateway_factory(fake.url)
    env = agent_env(gw.run_dir, "/run/a2c/driver.sock")
    assert env == {"A2C_DRIVER": f"fake/{MODEL}", "A2C_DRIVER_MODEL": MODEL,
                   "A2C_DRIVER_WIRE": "", "A2C_DRIVER_SOCKET": "/run/a2c/driver.sock",
                   "A2C_DRIVER_KEY": gw.key}
    assert agent_env(gw.run_dir)["A2C_DRIVER_SOCKET"] == str(gw.paths.driver_socket)
    assert PROVIDER_KEY not in json.dumps(env)
    gw.call("anthropic")
    gw.totals(1)
    gw.proc.stop()
    log = gw.paths.driver_log.read_text()
    assert "#0 200 anthropic /v1/messages model=claude-sonnet-4-5 in=11 out=7" in log


def test_agent_hanging_up_mid_stream(gateway_factory, fake):
    """The agent goes away half way through a stream: the gateway records what the provider
    sent (usage included: it was billed) and serves the next call."""
    import threading
    import time

    from gateway_fakes import UnixHTTP
    fake.hold = threading.Event()
    gw = gateway_factory(fake.url)
    conn = UnixHTTP(gw.paths.driver_socket)
    conn.request("POST", "/v1/messages", headers={"x-api-key": gw.key},
                 body=json.dumps({"model": MODEL, "stream": True, "messages": []}))
    resp = conn.getresponse()
    assert b"message_start" in resp.read1(65536)
    conn.sock.close()
    conn.close()
    time.sleep(0.1)
    fake.hold.set()
    t = gw.totals(1)
    assert t["output_tokens"] == USAGE["anthropic"]["output_tokens"]
    call = [e["data"] for e in read_events(gw.paths.events) if e["type"] == "driver_call"][0]
    assert call["error"] == "client_gone"
    fake.hold = None
    assert gw.call("anthropic", True)[0] == 200


@pytest.mark.parametrize("path,wire", [("/chat/completions", "openai-chat"),
                                       ("/responses", "openai-responses"),
                                       ("/messages", "anthropic"),
                                       (f"/models/{MODEL}:generateContent", "gemini")])
def test_paths_without_the_version_prefix(gateway_factory, fake, path, wire):
    """A scaffold given the base URL without /v1 (or /v1beta) is served the same."""
    gw = gateway_factory(fake.url)
    status, _, body = gw.call(wire, path=path)
    assert status == 200, body
    assert fake.requests[-1]["path"].startswith("/v1beta/" if wire == "gemini" else "/v1/")
    assert gw.totals(1)["calls"] == 1
