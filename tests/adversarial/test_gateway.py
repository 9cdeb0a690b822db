"""A hostile agent against the driver gateway (issue 23, "nothing to forge, nothing to overspend"):
each test repeats a route the red team found and must fail it.

The upstream is a fake provider on loopback that records every request reaching it and bills
the worst case: its usage reports the input at ~4 bytes a token and the output at the full
`max_tokens` (or the wire's equivalent) the forwarded request allows."""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime" / "driver_gateway"))

from gateway_fakes import PROVIDER_KEY, UnixHTTP, start_gateway  # noqa: E402

from a2c.contracts.events import read_events, verify_events  # noqa: E402
from a2c.runtime.driver_gateway.admission import input_estimate  # noqa: E402
from a2c.runtime.driver_gateway.prices import cost_usd, price_for  # noqa: E402
from a2c.wires.strict import encode  # noqa: E402

SONNET = "claude-sonnet-4-5"


def _lenient_int(value, default):
    """A number as a lenient server reads it (pydantic's lax mode): 8.0, "8", "90000" -> int."""
    try:
        return int(float(value)) if value is not None else default
    except (TypeError, ValueError):
        return default


def _first_wins(pairs):
    """A parser that keeps the first of a key given twice (Python's json keeps the last)."""
    out = {}
    for key, value in pairs:
        out.setdefault(key, value)
    return out


class BillingProvider:
    """Records every request (any method, with its raw bytes); answers generation calls billing
    the worst case, read the way a lenient provider reads: caps and counts as numbers whatever
    their JSON type (`"90000"`, `8.0`), the first of a key given twice, output billed at the
    cap times the candidates, input at ~4 bytes a token (`per_byte`: one token per byte, the
    most any byte-level tokenizer yields). Token-counting routes answer the same count of the
    input and are kept apart, in `counts` (the gateway asks them itself when a call's input
    bound does not fit a budget). `usage=False` answers streams without any usage field;
    `hold` (an Event) pauses a stream after its first event, and a JSON answer before it is
    sent, until set."""

    def __init__(self):
        self.requests: list[dict] = []
        self.counts: list[dict] = []
        self.usage = True
        self.per_byte = False
        self.hold: threading.Event | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw, object_pairs_hook=_first_wins) if raw else None
                except ValueError:
                    body = None
                seen = {"method": self.command, "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body, "raw": raw}
                tokens = len(raw) if fake.per_byte else len(raw) // 4
                path = self.path.split("?")[0]
                if path.endswith(("/count_tokens", "/input_tokens", ":countTokens")):
                    fake.counts.append(seen)
                    return self._send(200, json.dumps({"input_tokens": tokens,
                                                       "totalTokens": tokens}).encode(),
                                      "application/json")
                fake.requests.append(seen)
                if not isinstance(body, dict):
                    return self._send(200, b'{"ok": true}', "application/json")
                self._answer(body, tokens)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _any

            def _send(self, status, data, ctype):
                if fake.hold is not None and ctype == "application/json":
                    fake.hold.wait(30)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, events):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for i, e in enumerate(events):
                        data = b"data: " + json.dumps(e).encode() + b"\n\n"
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        if i == 0 and fake.hold is not None:
                            fake.hold.wait(30)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    self.close_connection = True

            def _answer(self, body, input_tokens):
                path = self.path.split("?")[0]
                gen = body.get("generationConfig") or {}
                cap = (body.get("max_tokens") or body.get("max_completion_tokens") or
                       body.get("max_output_tokens") or gen.get("maxOutputTokens"))
                n = _lenient_int(body.get("n") or gen.get("candidateCount"), 1)
                out = _lenient_int(cap, 99999) * n
                stream = body.get("stream") is True or "streamGenerateContent" in path
                model = body.get("model")
                if path.endswith("/messages"):
                    usage = {"input_tokens": input_tokens, "output_tokens": out}
                    obj = {"type": "message", "model": model, "content": [], "usage": usage}
                    events = [{"type": "message_start", "message": {
                        "model": model, "usage": {"input_tokens": input_tokens,
                                                  "output_tokens": 1}}},
                              {"type": "message_delta", "usage": {"output_tokens": out}},
                              {"type": "message_stop"}]
                    if not fake.usage:
                        events = [{"type": "message_stop"}]
                elif path.endswith("/chat/completions"):
                    usage = {"prompt_tokens": input_tokens, "completion_tokens": out}
                    obj = {"object": "chat.completion", "model": model, "choices": [],
                           "usage": usage}
                    events = [{"object": "chat.completion.chunk", "choices": []}]
                    if fake.usage and (body.get("stream_options") or {}).get("include_usage"):
                        events.append({"object": "chat.completion.chunk", "choices": [],
                                       "usage": usage})
                elif path.endswith("/responses"):
                    usage = {"input_tokens": input_tokens, "output_tokens": out}
                    obj = {"object": "response", "model": model, "output": [], "usage": usage}
                    events = [{"type": "response.created", "response": {"model": model}},
                              {"type": "response.completed", "response": obj}]
                else:
                    usage = {"promptTokenCount": input_tokens, "candidatesTokenCount": out}
                    obj = {"candidates": [], "usageMetadata": usage}
                    events = [obj] if fake.usage else [{"candidates": []}]
                if not stream:
                    return self._send(200, json.dumps(obj).encode(), "application/json")
                self._stream(events)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream():
    f = BillingProvider()
    yield f
    f.close()


@pytest.fixture
def gateway(monkeypatch, tmp_path, upstream):
    monkeypatch.setenv("FAKE_PROVIDER_KEY", PROVIDER_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    made = []

    def make(model=SONNET, **kw):
        gw = start_gateway(tmp_path, upstream.url, monkeypatch, name=f"run{len(made)}",
                           driver=f"fake/{model}", **kw)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.conn.close()
        gw.proc.stop()


def _raw(gw, method, path, body=None, headers=None):
    """One request on a fresh connection: (status, the JSON body, or the raw bytes of a
    stream)."""
    conn = UnixHTTP(gw.paths.driver_socket)
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"x-api-key": gw.key,
                                                   "Content-Type": "application/json",
                                                   **(headers or {})})
    resp = conn.getresponse()
    out = resp.read()
    conn.close()
    if resp.getheader("Content-Type", "").startswith("text/event-stream"):
        return resp.status, out
    return resp.status, json.loads(out) if out else None


def _calls(gw):
    return [e["data"] for e in read_events(gw.paths.events) if e["type"] == "driver_call"]


MSG = {"model": SONNET, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
GEM = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
UNMETERED = [
    ("POST", "/v1/messages/batches", {"requests": [{"custom_id": "a", "params": MSG}]}),
    ("GET", "/v1/messages/batches", None),
    ("POST", f"/v1beta/models/{SONNET}:batchGenerateContent", GEM),
    ("POST", f"/v1beta/models/{SONNET}:embedContent", GEM),
    ("DELETE", "/v1/models/x", None),
    ("DELETE", f"/v1/models/{SONNET}", None),
    ("POST", "/v1/files", {}),
    ("POST", "/v1/../v1/files", {}),
    ("POST", "/v1/messages/../files", MSG),
    ("POST", "/v1/%2e%2e/v1/files", {}),
    ("POST", "/v1/messages/%2e%2e/batches", MSG),
    ("POST", "/v1/messages%2Fbatches", MSG),
    ("POST", "/v1/messages%252Fbatches", MSG),
    ("POST", "/v1/%6dessages", MSG),
    ("POST", "/v1/./messages", MSG),
    ("POST", "/v1//messages", MSG),
    ("POST", "/v1/messages/", MSG),
    ("POST", "/v1\\messages", MSG),
    ("POST", "/v1beta/models/..:generateContent", GEM),
    ("POST", f"/v1beta/models/{SONNET}%3AgenerateContent", GEM),
    ("POST", "/v1/messages?beta=true&extra=1", MSG),
    ("POST", "/v1/messages?beta=false", MSG),
    ("POST", "/v1/chat/completions?api-version=1", MSG),
    ("PUT", "/v1/messages", MSG),
    ("GET", "/v1/messages", None),
    ("POST", "/v1/fine_tuning/jobs", {}),
    ("POST", "/v1/responses/compact", {"model": SONNET}),
    ("GET", "/v1/responses/resp_123", None),
    ("POST", "http://evil.example/v1/messages", MSG),
]


def test_unmetered_routes_never_reach_the_upstream(gateway, upstream):
    """Batches, file and model APIs, traversal and encoded paths: refused in the wire's shape
    and recorded, before and after the budget is spent; only the one metered call goes up."""
    gw = gateway(budget={"driver_calls": 1})
    for round_ in ("before", "after"):
        for method, path, body in UNMETERED:
            status, answer = _raw(gw, method, path, body)
            assert status in (400, 404), (round_, method, path, status)
            assert "error" in answer, (method, path)
            if path.startswith("/v1/messages"):        # the Anthropic client's own shape
                assert answer["type"] == "error", path
        if round_ == "before":
            assert _raw(gw, "POST", "/v1/messages?beta=true", MSG)[0] == 200
            assert _raw(gw, "POST", "/v1/messages", MSG)[0] == 400      # the budget is spent
    assert [(r["method"], r["path"]) for r in upstream.requests] == \
        [("POST", "/v1/messages?beta=true")]
    gw.totals(2 * len(UNMETERED) + 2)
    calls = _calls(gw)
    refused = [c for c in calls if c.get("error") in ("not_served", "bad_request")]
    assert len(refused) == 2 * len(UNMETERED)
    assert all("%" not in c["path"] or c["error"] == "bad_request" for c in refused)
    assert verify_events(gw.paths.events).ok


def test_model_lists_are_answered_by_the_gateway(gateway, upstream):
    gw = gateway(allow_models=["claude-haiku-4-5"])
    status, answer = _raw(gw, "GET", "/v1/models")
    ids = [m["id"] for m in answer["data"]]
    assert status == 200 and ids[0] == SONNET and "claude-haiku-4-5" in ids
    assert "claude-sonnet-4-5-20250929" in ids and "claude-opus-4-5" not in ids
    assert _raw(gw, "GET", f"/v1beta/models/{SONNET}")[0] == 200
    assert _raw(gw, "GET", "/v1/models/claude-opus-4-1")[0] == 404
    assert upstream.requests == []


FORBIDDEN = {"OpenAI-Organization": "org-evil", "OpenAI-Project": "proj-evil",
             "X-Forwarded-Host": "evil.example", "X-Forwarded-For": "1.2.3.4",
             "Forwarded": "host=evil.example", "X-Real-IP": "1.2.3.4",
             "Authorization": "Bearer sk-agent-own-key", "Cookie": "session=1",
             "Proxy-Authorization": "Basic eA==", "X-HTTP-Method-Override": "DELETE",
             "anthropic-dangerous-direct-browser-access": "true",
             "x-goog-user-project": "evil", "Helicone-Auth": "x", "OpenAI-Beta": "assistants=v2"}


@pytest.mark.parametrize("auth_header", ["x-api-key", "authorization"])
def test_forbidden_headers_never_reach_the_upstream(gateway, upstream, auth_header):
    gw = gateway()
    headers = {**FORBIDDEN, "anthropic-version": "2023-06-01",
               "anthropic-beta": "files-api-2025-04-14, interleaved-thinking-2025-05-14,"
                                 "mcp-client-2025-04-04,context-1m-2025-08-07",
               "User-Agent": "claude-cli/2"}
    if auth_header == "authorization":          # the run key as a bearer, no x-api-key
        headers["Authorization"] = f"Bearer {gw.key}"
    conn = UnixHTTP(gw.paths.driver_socket)
    sent = {**headers, **({"x-api-key": gw.key} if auth_header == "x-api-key" else {})}
    conn.request("POST", "/v1/messages", body=json.dumps(MSG), headers=sent)
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    resp.read()
    conn.close()
    got = upstream.requests[-1]["headers"]
    assert set(got) <= {"content-type", "accept", "anthropic-version", "anthropic-beta",
                        "user-agent", "host", "accept-encoding", "content-length", "x-api-key"}
    assert got["x-api-key"] == PROVIDER_KEY
    assert got["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert got["host"] == upstream.url.removeprefix("http://")
    assert gw.key not in json.dumps(got)


def _parallel(gw, wire, n=10, max_tokens=6000, stream=False):
    body = ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
             "generationConfig": {"maxOutputTokens": max_tokens}} if wire == "gemini" else
            {"model": SONNET, "max_tokens": max_tokens, "stream": stream,
             "messages": [{"role": "user", "content": "hi"}]})
    path = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
            "gemini": f"/v1beta/models/{SONNET}:generateContent"}[wire]
    barrier = threading.Barrier(n)

    def one(_):
        barrier.wait()
        return _raw(gw, "POST", path, body)[0]

    with ThreadPoolExecutor(n) as pool:
        statuses = list(pool.map(one, range(n)))
    return statuses, input_estimate(encode(body))


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat", "gemini"])
def test_parallel_calls_cannot_overspend_a_token_budget(gateway, upstream, wire):
    """10 calls at once, each allowed 6000 output tokens, against 10,000 tokens: the red team
    saw all admitted and 60,000 metered; now the total stays within the budget plus one call."""
    gw = gateway(budget={"driver_tokens": 10_000})
    statuses, est = _parallel(gw, wire)
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 400, 429}
    t = gw.totals(10)
    assert t["tokens"] <= 10_000 + est + 6000
    assert t["tokens"] <= 10_000 + 10            # in fact within it: the caps were lowered
    assert len(upstream.requests) == statuses.count(200) < 10
    assert t["exhausted"]["limit"] == "tokens"


def test_parallel_calls_cannot_overspend_a_cost_budget(gateway, upstream):
    """The same with $0.05: each call could cost $0.09 of output alone."""
    gw = gateway(budget={"driver_cost_usd": 0.05})
    statuses, est = _parallel(gw, "anthropic", stream=True)
    p = price_for(SONNET)
    one_call = cost_usd(p, est, 6000)
    t = gw.totals(10)
    assert 200 in statuses
    assert t["cost_usd"] <= 0.05 + one_call
    assert t["cost_usd"] <= 0.05 + 1e-6
    forwarded = [r["body"]["max_tokens"] for r in upstream.requests]
    assert forwarded and all(m < 6000 for m in forwarded)    # lowered to what was left


def test_streamed_chat_without_usage_is_metered(gateway, upstream):
    gw = gateway()
    body = {"model": SONNET, "stream": True, "max_tokens": 50,
            "stream_options": {"include_usage": False},
            "messages": [{"role": "user", "content": "hi"}]}
    conn = UnixHTTP(gw.paths.driver_socket)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                 headers={"Authorization": f"Bearer {gw.key}"})
    resp = conn.getresponse()
    status = resp.status
    resp.read()
    conn.close()
    assert status == 200
    assert upstream.requests[-1]["body"]["stream_options"] == {"include_usage": True}
    t = gw.totals(1)
    assert t["output_tokens"] == 50 and t["input_tokens"] > 0
    assert t["usage_missing_calls"] == 0


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat", "gemini"])
def test_a_stream_without_usage_is_charged_its_cap(gateway, upstream, wire):
    upstream.usage = False
    gw = gateway()
    body = ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
             "generationConfig": {"maxOutputTokens": 700}} if wire == "gemini" else
            {"model": SONNET, "stream": True, "max_tokens": 700,
             "messages": [{"role": "user", "content": "hi"}]})
    path = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
            "gemini": f"/v1beta/models/{SONNET}:streamGenerateContent?alt=sse"}[wire]
    assert _raw(gw, "POST", path, body)[0] == 200
    t = gw.totals(1)
    est = input_estimate(upstream.requests[-1]["raw"])      # the bound on what was forwarded
    assert t["output_tokens"] == 700 and t["input_tokens"] == est
    assert t["usage_missing_calls"] == 1
    assert t["cost_usd"] == pytest.approx(cost_usd(price_for(SONNET), est, 700))
    assert _calls(gw)[0]["usage_missing"] is True


def test_a_request_without_a_cap_gets_one_under_a_budget(gateway, upstream):
    gw = gateway(budget={"driver_tokens": 5000})
    body = {"model": SONNET, "messages": [{"role": "user", "content": "hi"}]}
    assert _raw(gw, "POST", "/v1/chat/completions", body)[0] == 200
    sent = upstream.requests[-1]["body"]
    assert 0 < sent["max_completion_tokens"] < 5000
    assert gw.totals(1)["tokens"] <= 5000


PINNED = "claude-opus-4"


@pytest.mark.parametrize("model,ok", [
    ("claude-opus-4", True), ("claude-opus-4-0", True),
    ("claude-opus-4-20250514", True),            # declared in prices.yaml
    ("claude-opus-4-1", False), ("claude-opus-4-1-20250805", False),
    ("claude-opus-4-20991231", False),           # dated, but not declared
    ("claude-opus-4-5", False), ("claude-opus-4-0-1", False), ("claude-opus-4 ", False),
    ("models/claude-opus-4-1", False)])
def test_pinning_is_an_explicit_list(gateway, upstream, model, ok):
    gw = gateway(model=PINNED)
    msg = {**MSG, "model": model}
    status, answer = _raw(gw, "POST", "/v1/messages", msg)
    assert status == (200 if ok else 400), answer
    if not ok:
        assert answer["error"]["type"] == "invalid_request_error"
        assert PINNED in answer["error"]["message"]
    status, _ = _raw(gw, "POST", "/v1/messages/count_tokens", msg)
    assert status == (200 if ok else 400)
    assert (len(upstream.requests), len(upstream.counts)) == ((1, 1) if ok else (0, 0))


def test_gemini_path_model_is_pinned(gateway, upstream):
    gw = gateway(model="gemini-2.5-pro")
    ok = _raw(gw, "POST", "/v1beta/models/gemini-2.5-pro:generateContent", GEM)
    assert ok[0] == 200
    for other in ("gemini-2.5-pro-exp", "gemini-2.5-flash", "gemini-2.5-pro-001"):
        status, answer = _raw(gw, "POST", f"/v1beta/models/{other}:generateContent", GEM)
        assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"
    assert len(upstream.requests) == 1


PROVIDER_TOOLS = [
    ("anthropic", "/v1/messages", {**MSG, "tools": [{"type": "web_search_20250305",
                                                     "name": "web_search"}]}),
    ("anthropic", "/v1/messages", {**MSG, "tools": [{"type": "web_fetch_20250910",
                                                     "name": "web_fetch"}]}),
    ("anthropic", "/v1/messages", {**MSG, "tools": [{"type": "code_execution_20250825",
                                                     "name": "code_execution"}]}),
    ("anthropic", "/v1/messages", {**MSG, "mcp_servers": [{"type": "url",
                                                           "url": "https://evil.example"}]}),
    ("openai-responses", "/v1/responses", {"model": SONNET, "input": "hi",
                                           "tools": [{"type": "web_search"}]}),
    ("openai-responses", "/v1/responses", {"model": SONNET, "input": "hi", "tools": [
        {"type": "mcp", "server_label": "x", "server_url": "https://evil.example"}]}),
    ("openai-responses", "/v1/responses", {"model": SONNET, "input": "hi",
                                           "tools": [{"type": "code_interpreter"}]}),
    ("openai-chat", "/v1/chat/completions", {**MSG, "web_search_options": {}}),
    ("gemini", f"/v1beta/models/{SONNET}:generateContent", {**GEM, "tools": [
        {"googleSearch": {}}]}),
    ("gemini", f"/v1beta/models/{SONNET}:generateContent", {**GEM, "tools": [
        {"functionDeclarations": []}, {"url_context": {}}]}),
]


@pytest.mark.parametrize("wire,path,body", PROVIDER_TOOLS,
                         ids=[f"{w}-{i}" for i, (w, _, _) in enumerate(PROVIDER_TOOLS)])
def test_provider_side_tools_are_refused(gateway, upstream, wire, path, body):
    """Web search, fetch, code execution, remote MCP: billed apart from tokens and a way to
    the network from a sandbox that has none. Client-side tools pass."""
    gw = gateway()
    status, answer = _raw(gw, "POST", path, body)
    assert status == 400 and "provider-side tools" in json.dumps(answer)
    assert upstream.requests == []
    client = ({**GEM, "tools": [{"functionDeclarations": [{"name": "f"}]}]} if wire == "gemini"
              else {**body, "tools": [{"type": "function", "name": "f"},
                                      {"type": "bash_20250124", "name": "bash"}]})
    client.pop("mcp_servers", None)
    client.pop("web_search_options", None)
    assert _raw(gw, "POST", path, client)[0] == 200


def test_a_flood_of_idle_connections_costs_bounded_threads_and_calls_still_go_through(gateway):
    """An agent that opens connection after connection and sends nothing: the gateway keeps at
    most MAX_CONNECTIONS (closing the ones idle longest), and the next call is answered."""
    import re
    import socket
    import time

    from a2c.runtime.driver_gateway.server import MAX_CONNECTIONS
    gw = gateway()
    pid = int(gw.paths.driver_pid.read_text())
    flood = []
    try:
        for _ in range(MAX_CONNECTIONS * 3):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(None)            # blocking: wait while the listen backlog is full
            s.connect(str(gw.paths.driver_socket))
            flood.append(s)
        # a blocking connect waits its turn in the listen queue the flood may still fill
        for method, path, body in (("GET", "/a2c/health", None), ("POST", "/v1/messages", MSG)):
            conn = UnixHTTP(gw.paths.driver_socket, timeout=None)
            conn.request(method, path, body=None if body is None else json.dumps(body).encode(),
                         headers={"x-api-key": gw.key, "Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200, (path, resp.status, resp.read())
            resp.read()
            conn.close()
        deadline = time.monotonic() + 10     # a closed connection's thread ends on its own
        while True:
            threads = int(re.search(r"Threads:\s+(\d+)",
                                    Path(f"/proc/{pid}/status").read_text()).group(1))
            if threads <= MAX_CONNECTIONS + 16 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert threads <= MAX_CONNECTIONS + 16, threads
    finally:
        for s in flood:
            s.close()


# ---------------------------------------------------------------------------------------------
# Issue 32: one reading of every request. The red team sent bodies the gateway read one way and
# a lenient provider another (a key twice, caps and counts as floats or strings), dense text
# that beat the input estimate, and a call cut at the run's end that left no trace.

PATH = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
        "openai-responses": "/v1/responses",
        "gemini": f"/v1beta/models/{SONNET}:generateContent"}
SIBLING = "claude-haiku-4-5"


def _post_raw(gw, path, raw: bytes, headers=None):
    """POST these exact bytes: (status, the JSON answer)."""
    conn = UnixHTTP(gw.paths.driver_socket)
    conn.request("POST", path, body=raw, headers={"x-api-key": gw.key,
                                                  "Content-Type": "application/json",
                                                  **(headers or {})})
    resp = conn.getresponse()
    out = resp.read()
    conn.close()
    return resp.status, json.loads(out) if out else None


def _error_message(wire, answer):
    if wire == "anthropic":
        assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"
    elif wire == "gemini":
        assert answer["error"]["status"] == "INVALID_ARGUMENT"
    else:
        assert answer["error"]["type"] == "invalid_request_error"
    return answer["error"]["message"]


DUPLICATES = [
    # the sibling model first: a first-wins provider serves (and names) the sibling
    ("anthropic", b'{"model":"%s","model":"%s","max_tokens":64,'
                  b'"messages":[{"role":"user","content":"hi"}]}' % (SIBLING.encode(),
                                                                     SONNET.encode())),
    ("openai-chat", b'{"model":"%s","messages":[{"role":"user","content":"hi"}],'
                    b'"model":"%s"}' % (SIBLING.encode(), SONNET.encode())),
    ("openai-responses", b'{"model":"%s","model":"%s","input":"hi"}' % (SIBLING.encode(),
                                                                      SONNET.encode())),
    # a cap twice, at depth: the gateway would lower one, the provider read the other
    ("gemini", b'{"contents":[{"role":"user","parts":[{"text":"hi"}]}],'
               b'"generationConfig":{"maxOutputTokens":90000,"maxOutputTokens":10}}'),
    ("anthropic", b'{"model":"%s","max_tokens":64,"messages":[{"role":"user","content":'
                  b'[{"type":"text","text":"a","text":"b"}]}]}' % SONNET.encode()),
    ("openai-chat", b'{"model":"%s","n":1,"n":8,"messages":[]}' % SONNET.encode()),
]


@pytest.mark.parametrize("wire,raw", DUPLICATES, ids=[f"{w}-{i}" for i, (w, _) in
                                                       enumerate(DUPLICATES)])
def test_a_key_given_twice_is_refused(gateway, upstream, wire, raw):
    """`"model"` twice, a sibling first: the red team's sibling answered and was metered
    under its own name. Now: 400 in the wire's shape naming the key, nothing forwarded."""
    gw = gateway(allow_models=[SIBLING], budget={"driver_tokens": 10_000})
    status, answer = _post_raw(gw, PATH[wire], raw)
    assert status == 400, answer
    assert "appears twice" in _error_message(wire, answer)
    assert upstream.requests == []
    t = gw.totals(1)
    assert t["calls"] == 0 and t["tokens"] == 0 and t["refused"] == 1
    assert _calls(gw)[0]["error"] == "bad_request"


@pytest.mark.parametrize("raw", [
    b'{"model":"%s","max_tokens":NaN,"messages":[]}' % SONNET.encode(),
    b'{"model":"%s","max_tokens":64,"temperature":Infinity,"messages":[]}' % SONNET.encode(),
    b'{"model":"%s","max_tokens":64,"temperature":1e999,"messages":[]}' % SONNET.encode(),
    b'{"model":"%s","max_tokens":64,"messages":[]}\xff' % SONNET.encode(),
    b'{"model":"%s","max_tokens":64,"messages":[]} {"model":"x"}' % SONNET.encode(),
    b'[' * 100_000,
])
def test_what_is_not_strict_json_is_refused(gateway, upstream, raw):
    gw = gateway()
    status, answer = _post_raw(gw, "/v1/messages", raw)
    assert status == 400 and answer["type"] == "error", answer
    # the token-counting route reads the same way
    status, _ = _post_raw(gw, "/v1/messages/count_tokens", raw)
    assert status == 400
    assert upstream.requests == []


def test_the_forwarded_body_is_the_gateways_own_serialization(gateway, upstream):
    """What goes upstream is the canonical JSON of the object the gateway checked: whitespace,
    escapes and key spellings of the agent's bytes never reach the provider."""
    gw = gateway()
    raw = ('{ "model" : "\\u0063laude-sonnet-4-5",\n  "max_tokens": 64 ,"messages": '
           '[{"role":"user","content":"caf\\u00e9 \u6570\u636e \\ud83d\\ude00"}] }').encode()
    status, _ = _post_raw(gw, "/v1/messages", raw)
    assert status == 200
    got = upstream.requests[-1]["raw"]
    assert got == encode(json.loads(raw))
    assert got.count(b'"model"') == 1 and b'"model":"claude-sonnet-4-5"' in got
    assert "café 数据 😀".encode() in got
    # the record holds the bytes forwarded (what took effect)
    gw.totals(1)
    call = _calls(gw)[0]
    assert (gw.paths.driver_blobs / call["request_sha256"]).read_bytes() == got


@pytest.mark.parametrize("wire,body,field", [
    ("openai-chat", {"model": SONNET, "n": 8.0, "max_completion_tokens": 9000,
                     "messages": []}, "n"),
    ("openai-chat", {"model": SONNET, "n": "8", "messages": []}, "n"),
    ("openai-chat", {"model": SONNET, "max_completion_tokens": "90000", "messages": []},
     "max_completion_tokens"),
    ("openai-chat", {"model": SONNET, "max_tokens": 9e4, "messages": []}, "max_tokens"),
    ("openai-chat", {"model": SONNET, "n": True, "messages": []}, "n"),
    ("openai-chat", {"model": SONNET, "best_of": "8", "messages": []}, "best_of"),
    ("openai-chat", {"model": SONNET, "n": 129, "messages": []}, "n"),
    ("anthropic", {"model": SONNET, "max_tokens": "90000", "messages": []}, "max_tokens"),
    ("anthropic", {"model": SONNET, "max_tokens": 10.0, "messages": []}, "max_tokens"),
    ("anthropic", {"model": SONNET, "max_tokens": -1, "messages": []}, "max_tokens"),
    ("anthropic", {"model": SONNET, "max_tokens": 2**31, "messages": []}, "max_tokens"),
    ("anthropic", {"model": SONNET, "max_tokens": 64, "thinking": {
        "type": "enabled", "budget_tokens": "50000"}, "messages": []}, "budget_tokens"),
    ("openai-responses", {"model": SONNET, "max_output_tokens": "90000", "input": "hi"},
     "max_output_tokens"),
    ("gemini", {**GEM, "generationConfig": {"candidateCount": "8"}}, "candidateCount"),
    ("gemini", {**GEM, "generationConfig": {"candidateCount": 8.0}}, "candidateCount"),
    ("gemini", {**GEM, "generationConfig": {"maxOutputTokens": "90000"}}, "maxOutputTokens"),
    ("gemini", {**GEM, "generation_config": {"max_output_tokens": 10.0}}, "maxOutputTokens"),
    ("anthropic", {"model": SONNET, "max_tokens": 64, "stream": "true", "messages": []},
     "stream"),
])
def test_caps_and_counts_must_be_json_integers(gateway, upstream, wire, body, field):
    """`n: 8.0`, `candidateCount: "8"`, `max_completion_tokens: "90000"`: reserved as one
    candidate or the other cap, served by a lenient provider as 8 or 90,000 (72,000-90,000
    tokens against a 5,000-10,000 budget); `max_tokens: 10.0` was read as no cap and replaced
    by the whole remaining budget. Now each is refused, naming the field."""
    gw = gateway(budget={"driver_tokens": 10_000})
    status, answer = _raw(gw, "POST", PATH[wire], body)
    assert status == 400, answer
    assert field in _error_message(wire, answer)
    assert upstream.requests == []
    assert gw.totals(1)["tokens"] == 0


def test_an_integer_cap_of_ten_is_ten(gateway, upstream):
    """The honest `10` next to the refused `10.0`: forwarded as 10, charged 10."""
    gw = gateway(budget={"driver_tokens": 10_000})
    assert _raw(gw, "POST", "/v1/messages", {**MSG, "max_tokens": 10})[0] == 200
    assert upstream.requests[-1]["body"]["max_tokens"] == 10
    assert gw.totals(1)["output_tokens"] == 10


@pytest.mark.parametrize("wire,n_field", [("openai-chat", "n"), ("openai-chat", "best_of"),
                                          ("gemini", "candidateCount")])
def test_candidates_are_priced(gateway, upstream, wire, n_field):
    """A count of candidates is reserved as that many answers: the cap each may use is what
    the budget leaves divided among them, and the provider bills within the budget."""
    upstream.per_byte = True
    gw = gateway(budget={"driver_tokens": 10_000})
    if wire == "gemini":
        body = {**GEM, "generationConfig": {"maxOutputTokens": 9000, n_field: 4}}
    else:
        body = {"model": SONNET, "max_tokens": 9000, "n": 4 if n_field == "n" else 1,
                "messages": [{"role": "user", "content": "hi"}],
                **({"best_of": 4} if n_field == "best_of" else {})}
    assert _raw(gw, "POST", PATH[wire], body)[0] == 200
    sent = upstream.requests[-1]["body"]
    cap = sent["generationConfig"]["maxOutputTokens"] if wire == "gemini" else sent["max_tokens"]
    assert cap * 4 <= 10_000 - len(upstream.requests[-1]["raw"])
    if n_field != "best_of":             # the fake bills n (or candidateCount) answers
        assert gw.totals(1)["tokens"] <= 10_000


REFUSED_FIELDS = [
    ("openai-chat", {"service_tier": "priority"}, "service_tier"),
    ("openai-responses", {"service_tier": "scale"}, "service_tier"),
    ("anthropic", {"service_tier": "priority"}, "service_tier"),
    ("anthropic", {"speed": "fast"}, "speed"),
    ("openai-chat", {"prediction": {"type": "content", "content": "x" * 100}}, "prediction"),
    ("openai-chat", {"modalities": ["text", "audio"]}, "modalities"),
    ("openai-responses", {"background": True}, "background"),
    ("openai-responses", {"previous_response_id": "resp_1"}, "previous_response_id"),
    ("openai-responses", {"conversation": "conv_1"}, "conversation"),
    ("openai-responses", {"input": [{"type": "item_reference", "id": "msg_1"}]},
     "item_reference"),
    ("gemini", {"cachedContent": "cachedContents/x"}, "cachedContent"),
    ("gemini", {"cached_content": "cachedContents/x"}, "cachedContent"),
    ("gemini", {"generationConfig": {"responseModalities": ["TEXT", "IMAGE"]}},
     "responseModalities"),
    ("gemini", {"generationConfig": {"maxOutputTokens": 5},
                "generation_config": {"maxOutputTokens": 9000}}, "given twice"),
    # media the provider would fetch: network from a sandbox that has none, size unknown
    ("anthropic", {"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "url", "url": "https://example.com/a.png"}}]}]}, "URL"),
    ("openai-chat", {"messages": [{"role": "user", "content": [{"type": "image_url",
        "image_url": {"url": "https://example.com/a.png?q=secret"}}]}]}, "URL"),
    ("openai-responses", {"input": [{"role": "user", "content": [{"type": "input_file",
                                                                 "file_id": "file-1"}]}]},
     "file id"),
    ("gemini", {"contents": [{"role": "user", "parts": [{"fileData": {
        "fileUri": "https://example.com/a.pdf"}}]}]}, "URL"),
]


@pytest.mark.parametrize("wire,extra,word", REFUSED_FIELDS,
                         ids=[f"{w}-{i}" for i, (w, _, _) in enumerate(REFUSED_FIELDS)])
def test_fields_that_change_price_or_volume_unmetered_are_refused(gateway, upstream, wire,
                                                                   extra, word):
    gw = gateway()
    base = {"anthropic": MSG, "openai-chat": {"model": SONNET, "messages": []},
            "openai-responses": {"model": SONNET, "input": "hi"}, "gemini": GEM}[wire]
    status, answer = _raw(gw, "POST", PATH[wire], {**base, **extra})
    assert status == 400, answer
    assert word in _error_message(wire, answer)
    assert upstream.requests == []


def test_gemini_snake_case_caps_are_read_and_forwarded_as_one_field(gateway, upstream):
    """The Gemini API reads `generation_config.max_output_tokens` as well: the gateway reads
    it too, and forwards the cap it granted in one spelling."""
    gw = gateway(budget={"driver_tokens": 5000})
    body = {**GEM, "generation_config": {"max_output_tokens": 90_000, "candidate_count": 1}}
    assert _raw(gw, "POST", PATH["gemini"], body)[0] == 200
    sent = upstream.requests[-1]["body"]
    assert "generation_config" not in sent
    assert sent["generationConfig"]["maxOutputTokens"] < 5000
    assert gw.totals(1)["tokens"] <= 5000


DENSE = "\U00020000\U0002a6d6\U0001f600\U0001d11e" * 1500      # 6,000 chars, 24,000 bytes


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat", "gemini"])
def test_dense_text_cannot_beat_the_input_bound(gateway, upstream, wire):
    """Dense non-ASCII text is up to one token a byte; the old estimate of bytes/4 let the red
    team be served 24,192 tokens against 20,000. The provider here bills one token per byte
    forwarded (the most any byte-level tokenizer can): calls are admitted while they fit, the
    one that would pass the budget is refused, and the total stays within it."""
    upstream.per_byte = True
    gw = gateway(budget={"driver_tokens": 20_000})

    def body(text, cap):
        if wire == "gemini":
            return {"contents": [{"role": "user", "parts": [{"text": text}]}],
                    "generationConfig": {"maxOutputTokens": cap}}
        return {"model": SONNET, "max_tokens": cap,
                "messages": [{"role": "user", "content": text}]}

    status, _ = _raw(gw, "POST", PATH[wire], body(DENSE, 100))   # 24,000 bytes: cannot fit
    assert status in (400, 429)
    assert upstream.requests == []
    statuses = [_raw(gw, "POST", PATH[wire], body(DENSE[:1000], 2000))[0] for _ in range(6)]
    assert statuses[0] == 200 and statuses[-1] in (400, 429)
    t = gw.totals(7)
    assert t["tokens"] <= 20_000, t
    assert len(upstream.requests) == statuses.count(200)
    for r in upstream.requests:          # the provider's bill of each, within its reservation
        assert len(r["raw"]) <= input_estimate(r["raw"])


def _stop_with_a_call_in_flight(gw, upstream, path, body, *, hang_up=False):
    """Send a call the provider holds (after its first event, or before a JSON answer); stop
    the gateway as the runtime does at the deadline; the call's event."""
    import time

    upstream.hold = threading.Event()
    conn = UnixHTTP(gw.paths.driver_socket, timeout=30)
    conn.request("POST", path, body=json.dumps(body).encode(),
                 headers={"x-api-key": gw.key, "Content-Type": "application/json"})
    first = b""
    if body.get("stream"):
        resp = conn.getresponse()
        first = resp.read1(65536)
        assert first, "the first event reached the agent"
    else:
        deadline = time.monotonic() + 10
        while not upstream.requests and time.monotonic() < deadline:
            time.sleep(0.02)
    if hang_up:                     # the agent is killed first: its connection closes
        conn.sock.close()
        conn.close()
        time.sleep(0.2)
    gw.proc.stop()                  # SIGTERM: what the runtime does at the run's end
    if body.get("stream") and not hang_up:
        import http.client
        with pytest.raises(http.client.IncompleteRead):   # cut, not a short complete answer
            resp.read()
    conn.close()
    calls = _calls(gw)
    assert len(calls) == 1, calls
    return calls[0], first


@pytest.mark.parametrize("wire", ["anthropic", "openai-chat", "openai-responses", "gemini"])
def test_a_stream_cut_by_the_runs_end_is_recorded_and_charged(gateway, upstream, wire):
    """A stream in flight when the gateway stops (the deadline): recorded as `cut`, with what
    was streamed and the usage seen, charged at least its reservation. (Against a real vLLM
    server the red team saw '0 calls'.)"""
    gw = gateway(timeout_s=30)
    body = {"anthropic": {**MSG, "stream": True, "max_tokens": 3000},
            "openai-chat": {**MSG, "stream": True, "max_tokens": 3000},
            "openai-responses": {"model": SONNET, "input": "hi", "stream": True,
                                 "max_output_tokens": 3000},
            "gemini": {**GEM, "generationConfig": {"maxOutputTokens": 3000}}}[wire]
    path = PATH[wire]
    if wire == "gemini":
        path = f"/v1beta/models/{SONNET}:streamGenerateContent?alt=sse"
        body = {**body, "stream": True}      # read by _stop_with_a_call_in_flight only
    call, first = _stop_with_a_call_in_flight(gw, upstream, path, body)
    est = input_estimate(upstream.requests[-1]["raw"])
    assert call["error"] == "cut" and call["status"] == 200 and call["stream"] is True
    assert call["usage_missing"] is True
    assert call["input_tokens"] + call["cache_read_tokens"] >= est
    assert call["output_tokens"] >= 3000
    blob = (gw.paths.driver_blobs / call["response_sha256"]).read_bytes()
    assert blob == first                  # what was streamed before the cut
    t = gw.totals()
    assert t["calls"] == 1 and t["usage_missing_calls"] == 1
    assert t["tokens"] >= est + 3000 and t["cost_usd"] > 0
    assert verify_events(gw.paths.events).ok


def test_an_uncapped_call_cut_before_its_answer_is_charged_its_reservation(gateway, upstream):
    """The red team's vLLM case: one uncapped, unbudgeted call waiting for its answer at the
    run's end. Recorded (503 cut), charged its input bound plus the default cap."""
    from a2c.runtime.driver_gateway.admission import DEFAULT_OUTPUT_CAP
    gw = gateway(timeout_s=30)
    body = {"model": SONNET, "messages": [{"role": "user", "content": "write forever"}]}
    call, _ = _stop_with_a_call_in_flight(gw, upstream, "/v1/chat/completions", body)
    est = input_estimate(upstream.requests[-1]["raw"])
    assert call["error"] == "cut" and call["status"] == 503 and call["usage_missing"] is True
    assert (call["input_tokens"], call["output_tokens"]) == (est, DEFAULT_OUTPUT_CAP)
    assert gw.totals()["calls"] == 1


def test_a_call_whose_agent_hung_up_is_charged_when_the_run_ends(gateway, upstream):
    """The agent is killed mid-stream (its connection closes); the gateway keeps reading the
    provider's answer for its usage; the run ends before the answer does: recorded as
    `client_gone`, charged at least its reservation."""
    gw = gateway(timeout_s=30)
    body = {**MSG, "stream": True, "max_tokens": 2500}
    call, _ = _stop_with_a_call_in_flight(gw, upstream, "/v1/messages", body, hang_up=True)
    est = input_estimate(upstream.requests[-1]["raw"])
    assert call["error"] == "client_gone" and call["usage_missing"] is True
    assert call["input_tokens"] >= est and call["output_tokens"] >= 2500


@pytest.mark.parametrize("wire", ["anthropic", "openai-responses", "gemini", "openai-chat"])
def test_where_the_bound_does_not_fit_the_providers_count_is_asked(gateway, upstream, wire):
    """Honest text is 3-4 bytes a token: at the end of a budget the byte bound no longer fits
    though the call does. The gateway then asks the provider's counting route (Anthropic
    count_tokens, Responses input_tokens, Gemini countTokens) and admits on that count; Chat
    has no counting route and is refused. The total stays within the budget."""
    gw = gateway(budget={"driver_tokens": 20_000})
    text = "The quick brown fox jumps over the lazy dog. " * 700          # 31 KB
    body = {"anthropic": {"model": SONNET, "max_tokens": 1000, "stream": True,
                          "messages": [{"role": "user", "content": text}]},
            "openai-chat": {"model": SONNET, "max_tokens": 1000,
                            "messages": [{"role": "user", "content": text}]},
            "openai-responses": {"model": SONNET, "max_output_tokens": 1000, "input": text,
                                 "store": False},
            "gemini": {"contents": [{"role": "user", "parts": [{"text": text}]}],
                       "generationConfig": {"maxOutputTokens": 1000}}}[wire]
    assert input_estimate(encode(body)) > 20_000
    statuses = [_raw(gw, "POST", PATH[wire], body)[0] for _ in range(3)]
    t = gw.totals(3)
    assert t["tokens"] <= 20_000
    if wire == "openai-chat":
        assert statuses[0] == 429 and upstream.requests == [] and upstream.counts == []
        return
    assert statuses[:2] == [200, 200] and statuses[2] in (400, 429), statuses
    assert len(upstream.requests) == 2 and len(upstream.counts) == 3
    asked = upstream.counts[0]
    want = {"anthropic": "/v1/messages/count_tokens", "openai-responses":
            "/v1/responses/input_tokens",
            "gemini": f"/v1beta/models/{SONNET}:countTokens"}[wire]
    assert asked["path"] == want
    counted = asked["body"].get("generateContentRequest", asked["body"])
    assert not {"max_tokens", "max_output_tokens", "stream", "store"} & set(counted)
    assert PROVIDER_KEY in json.dumps(asked["headers"])       # the provider's key, not the run's
    assert gw.key not in json.dumps(asked["headers"])
