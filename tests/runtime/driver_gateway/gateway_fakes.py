"""Fakes shared by the driver gateway tests: a provider on loopback for each wire, a Unix-socket
HTTP client, a gateway started for a throwaway run (imported by name; conftest holds fixtures)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from a2c.contracts.run_paths import RunPaths
from a2c.runtime.driver_gateway import DriverGatewayProcess, prepare_gateway, read_key, read_totals

PROVIDER_KEY = "sk-provider-SECRET-7f3a9c"
MODEL = "claude-sonnet-4-5"

# What the fake upstream reports, per wire, and what the gateway must count from it.
USAGE = {
    "anthropic": {"input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 5,
                  "cache_creation_input_tokens": 3},
    "openai-chat": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29,
                    "prompt_tokens_details": {"cached_tokens": 4}},
    "openai-responses": {"input_tokens": 30, "output_tokens": 12, "total_tokens": 42,
                         "input_tokens_details": {"cached_tokens": 10}},
    "gemini": {"promptTokenCount": 40, "candidatesTokenCount": 13, "thoughtsTokenCount": 2,
               "cachedContentTokenCount": 8, "totalTokenCount": 55},
}
EXPECTED = {   # input (uncached), output, cache_read, cache_write
    "anthropic": (11, 7, 5, 3), "openai-chat": (16, 9, 4, 0),
    "openai-responses": (20, 12, 10, 0), "gemini": (32, 15, 8, 0),
}
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions",
         "openai-responses": "/v1/responses",
         "gemini": f"/v1beta/models/{MODEL}:generateContent"}


def estimate(body: dict) -> int:
    """The input the gateway reserves for `body`: the bound on its own serialization."""
    from a2c.runtime.driver_gateway.admission import input_estimate
    from a2c.wires.strict import encode
    return input_estimate(encode(body))


def request_body(wire: str, stream: bool, model: str = MODEL) -> dict:
    if wire == "gemini":
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    body = {"model": model, "stream": stream}
    if wire == "openai-responses":
        body["input"] = "hi"
    else:
        body["messages"] = [{"role": "user", "content": "hi"}]
        body["max_tokens"] = 16
    return body


def wire_path(wire: str, stream: bool, model: str = MODEL) -> str:
    if wire == "gemini":
        return f"/v1beta/models/{model}:" + ("streamGenerateContent?alt=sse" if stream
                                             else "generateContent")
    return PATHS[wire]


def sse_events(wire: str, model: str, include_usage: bool) -> list[bytes]:
    u = USAGE[wire]

    def ev(obj, name=None):
        head = f"event: {name}\n" if name else ""
        return (head + "data: " + json.dumps(obj) + "\n\n").encode()

    if wire == "anthropic":
        start = {k: u[k] for k in ("input_tokens", "cache_read_input_tokens",
                                   "cache_creation_input_tokens")}
        return [ev({"type": "message_start", "message": {"id": "m1", "type": "message",
                                                         "role": "assistant", "model": model,
                                                         "usage": {**start, "output_tokens": 1}}},
                   "message_start"),
                ev({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}, "content_block_start"),
                ev({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": "Hello"}}, "content_block_delta"),
                ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": u["output_tokens"]}}, "message_delta"),
                ev({"type": "message_stop"}, "message_stop")]
    if wire == "openai-chat":
        out = [ev({"id": "c1", "object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
               ev({"id": "c1", "object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": {"content": "lo"},
                                "finish_reason": "stop"}]})]
        if include_usage:
            out.append(ev({"id": "c1", "object": "chat.completion.chunk", "model": model,
                           "choices": [], "usage": u}))
        return out + [b"data: [DONE]\n\n"]
    if wire == "openai-responses":
        resp = {"id": "r1", "object": "response", "model": model, "status": "in_progress",
                "usage": None}
        return [ev({"type": "response.created", "response": resp}, "response.created"),
                ev({"type": "response.output_text.delta", "delta": "Hello"},
                   "response.output_text.delta"),
                ev({"type": "response.completed",
                    "response": {**resp, "status": "completed", "usage": u}},
                   "response.completed")]
    half = {"promptTokenCount": u["promptTokenCount"], "candidatesTokenCount": 5,
            "totalTokenCount": 45}
    return [ev({"candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}}],
                "usageMetadata": half, "modelVersion": model}),
            ev({"candidates": [{"content": {"parts": [{"text": "lo"}], "role": "model"},
                                "finishReason": "STOP"}],
                "usageMetadata": u, "modelVersion": model})]


def json_answer(wire: str, model: str) -> dict:
    u = USAGE[wire]
    if wire == "anthropic":
        return {"id": "m1", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "Hello"}], "stop_reason": "end_turn",
                "usage": u}
    if wire == "openai-chat":
        return {"id": "c1", "object": "chat.completion", "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"},
                             "finish_reason": "stop"}], "usage": u}
    if wire == "openai-responses":
        return {"id": "r1", "object": "response", "model": model, "status": "completed",
                "output": [], "usage": u}
    return {"candidates": [{"content": {"parts": [{"text": "Hello"}], "role": "model"},
                            "finishReason": "STOP"}], "usageMetadata": u,
            "modelVersion": model}


class FakeProvider:
    """Loopback HTTP server speaking the four wires. `mode` selects a failure for the next
    request (500, slow, break; the gateway forwards no test header, so it is set here and used
    once); `hold` (an Event) pauses a stream after its first event until set."""

    def __init__(self, port: int = 0):
        self.requests: list[dict] = []
        self.counts: list[dict] = []       # token-counting requests (404 unless `count` set)
        self.count: int | None = None
        self.mode: str | None = None
        self.hold: threading.Event | None = None
        self.slow_s = 3.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.requests.append({"path": self.path, "headers": dict(self.headers),
                                      "body": None})
                self._json(200, {"object": "list", "data": [{"id": MODEL}]})

            def _json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen = {"path": self.path, "headers": dict(self.headers), "body": body}
                if self.path.split("?")[0].endswith(("/count_tokens", "/input_tokens",
                                                      ":countTokens")):
                    fake.counts.append(seen)
                    if fake.count is None:
                        return self._json(404, {"error": {"message": "no counting here"}})
                    return self._json(200, {"input_tokens": fake.count,
                                            "totalTokens": fake.count})
                fake.requests.append(seen)
                mode, fake.mode = fake.mode, None
                if mode == "500":
                    return self._json(500, {"error": {"message": "boom", "type": "server_error"}})
                if mode == "slow":
                    time.sleep(fake.slow_s)
                path = self.path.split("?")[0]
                wire = ("anthropic" if path.endswith("/messages") else
                        "openai-chat" if path.endswith("/chat/completions") else
                        "openai-responses" if path.endswith("/responses") else "gemini")
                model = body.get("model") or path.rsplit("/", 1)[-1].split(":")[0]
                stream = body.get("stream") is True or ":streamGenerateContent" in path
                if not stream:
                    return self._json(200, json_answer(wire, model))
                include = bool((body.get("stream_options") or {}).get("include_usage"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i, event in enumerate(sse_events(wire, model, include)):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                    if i == 0 and fake.hold is not None:
                        fake.hold.wait(10)
                    if i == 0 and mode == "break":        # the provider dies mid-stream
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                self.wfile.write(b"0\r\n\r\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = str(path)

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Gateway:
    """A prepared run with a running gateway process; `call()` speaks to it over its socket."""

    def __init__(self, run_dir: Path, proc: DriverGatewayProcess):
        self.run_dir, self.proc = run_dir, proc
        self.paths = RunPaths(run_dir)
        self.key = read_key(run_dir)
        self.conn = UnixHTTP(self.paths.driver_socket)

    def call(self, wire, stream=False, *, model=MODEL, headers=None, key="default",
             auth="x-api-key", body=None, path=None, method="POST"):
        key = self.key if key == "default" else key
        h = {"Content-Type": "application/json", **(headers or {})}
        path = path or wire_path(wire, stream, model)
        if key is not None:
            if auth == "x-api-key":
                h["x-api-key"] = key
            elif auth == "bearer":
                h["Authorization"] = f"Bearer {key}"
            elif auth == "x-goog-api-key":
                h["x-goog-api-key"] = key
            elif auth == "query":
                path += ("&" if "?" in path else "?") + f"key={key}"
        data = None if method == "GET" else json.dumps(
            body if body is not None else request_body(wire, stream, model)).encode()
        self.conn.request(method, path, body=data, headers=h)
        resp = self.conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()

    def totals(self, calls_seq: int | None = None, timeout: float = 10) -> dict:
        """totals.json once the gateway has recorded `calls_seq` requests (all of them)."""
        deadline = time.monotonic() + timeout
        while True:
            t = read_totals(self.run_dir)
            if calls_seq is None or t.get("seq", 0) >= calls_seq or time.monotonic() > deadline:
                return t
            time.sleep(0.02)


def write_drivers(tmp_path: Path, base_url: str, **extra) -> Path:
    import yaml
    prov = {"base_url": base_url, "key_env": "FAKE_PROVIDER_KEY",
            "wires": ["anthropic", "openai-chat", "openai-responses", "gemini"],
            "timeout_s": 1.0, **extra}
    path = tmp_path / "drivers.yaml"
    path.write_text(yaml.safe_dump({"providers": {"fake": prov}}))
    return path




def start_gateway(tmp_path: Path, base_url: str, monkeypatch, budget=None, name="run",
                  wire=None, driver=f"fake/{MODEL}", **extra) -> Gateway:
    monkeypatch.setenv("A2C_DRIVERS_FILE", str(write_drivers(tmp_path, base_url, **extra)))
    run_dir = tmp_path / name
    run_dir.mkdir()
    (run_dir / "logs").mkdir()
    agent = {"driver": {"default": MODEL, **({"wire": wire} if wire else {})}}
    prepare_gateway(RunPaths(run_dir), driver, agent, budget or {})
    proc = DriverGatewayProcess(run_dir)
    proc.start()
    return Gateway(run_dir, proc)
