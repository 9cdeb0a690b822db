"""The driver gateway process: an HTTP/1.1 server on the run's Unix socket that passes the
agent's model calls to the configured upstream, and meters, limits and records each one.

    python -m a2c.runtime.driver_gateway RUN_DIR     # reads RUN/driver/gateway.json

Per request: the per-run key is checked (any of the four header styles, or `?key=`), the wire
is read from the path, a generation call's model is checked against the pinned one and the
budget is checked; then the request goes upstream with the provider's key (from this process's
environment) in place of the run key, and the answer comes back chunk by chunk as it arrives
(an SSE stream is never buffered whole) while `UsageMeter` reads the usage fields out of the
passing bytes. Everything the gateway answers itself (refusals, upstream failures) is a body in
the wire's own error format, and everything is recorded by the `Ledger`.

The upstream is reached with http.client (HTTPS for https:// URLs), over a small pool of
keep-alive connections so a call to a remote provider does not pay a TLS handshake each time.
"""

from __future__ import annotations

import hmac
import http.client
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.fsutil import write_json_atomic

from .config import read_config, read_key
from .ledger import Ledger
from .wires import (
    BUDGET_STATUS,
    Route,
    UsageMeter,
    error_body,
    normalize,
    request_model,
    request_streams,
    route,
)

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "trailers", "transfer-encoding", "upgrade", "host", "content-length", "expect"}
AUTH_HEADERS = {"x-api-key", "authorization", "x-goog-api-key", "api-key"}
WIRE_AUTH = {"anthropic": "x-api-key", "openai-chat": "bearer", "openai-responses": "bearer",
             "gemini": "x-goog-api-key"}
READ_CHUNK = 65536


class Upstream:
    """The upstream base URL and a pool of idle keep-alive connections to it."""

    def __init__(self, base_url: str, timeout: float, connect_timeout: float):
        url = urllib.parse.urlsplit(base_url)
        self.https = url.scheme == "https"
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        self.base_url = base_url
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def path_for(self, path: str) -> str:
        """base path + request path, a shared first segment not doubled (a base URL ending in
        /v1 and a request for /v1/chat/completions give /v1/chat/completions)."""
        if not self.prefix:
            return path
        last = self.prefix.rsplit("/", 1)[-1]
        first = path.lstrip("/").split("/", 1)[0]
        prefix = self.prefix[: -len(last) - 1] if last == first else self.prefix
        return prefix + path

    def connect(self) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.connect_timeout)
        conn.connect()
        conn.sock.settimeout(self.timeout)
        if not self.https:
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, False

    def give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < 16:
                self._idle.append(conn)
                return
        conn.close()


class GatewayState:
    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.paths = RunPaths(run_dir)
        self.config = read_config(run_dir)
        self.key = read_key(run_dir)
        up = self.config["upstream"]
        if not up.get("base_url"):
            raise SystemExit(f"{self.paths.driver_config}: upstream.base_url is not set")
        self.upstream = Upstream(up["base_url"], float(up.get("timeout_s") or 600),
                                 float(up.get("connect_timeout_s") or 10))
        key_env = up.get("key_env")
        self.provider_key = os.environ.get(key_env) if key_env else None
        if key_env and not self.provider_key:
            raise SystemExit(f"${key_env} is not set in the gateway's environment")
        self.auth_style = up.get("auth")
        self.model = self.config["model"]
        self.allowed = {self.model, *self.config.get("allow_models", [])}
        self.wires = set(self.config["wires"])
        self.ledger = Ledger(run_dir, self.config)

    def model_ok(self, model: str | None) -> bool:
        if model is None:
            return True
        name = model[len("models/"):] if model.startswith("models/") else model
        if name in self.allowed:
            return True
        # a dated snapshot of the pinned model (claude-sonnet-4-5-20250929, gpt-5-2025-08-07)
        return any(name.startswith(m + "-") and name[len(m) + 1:].replace("-", "").isdigit()
                   for m in self.allowed)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, path: str, state: GatewayState):
        self.state = state
        super().__init__(path, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server_version = "a2c-driver-gateway/1"
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:
        return "agent"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):  # noqa: N802
        self._handle()

    def do_POST(self):  # noqa: N802
        self._handle()

    def do_DELETE(self):  # noqa: N802
        self._handle()

    def do_PUT(self):  # noqa: N802
        self._handle()

    # ------------------------------------------------------------------ helpers
    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _presented_keys(self, query: dict) -> list[str]:
        """Every key the request carries (a client may send more than one header style)."""
        h = self.headers
        keys: list[str] = []
        for name in ("x-api-key", "x-goog-api-key", "api-key"):
            keys += [v.strip() for v in h.get_all(name) or [] if v.strip()]
        for auth in h.get_all("Authorization") or []:
            if auth.lower().startswith("bearer ") and auth[7:].strip():
                keys.append(auth[7:].strip())
        keys += [k for k in query.get("key", []) if k]
        return keys

    def _send(self, status: int, body: bytes, headers: dict) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    # ------------------------------------------------------------------ one request
    def _handle(self) -> None:
        st: GatewayState = self.server.state
        t0 = time.perf_counter()
        self.path = normalize(self.path)
        split = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        body = self._read_body()
        rt = route(self.path)
        presented = self._presented_keys(query)
        authed = any(hmac.compare_digest(k.encode(), st.key.encode()) for k in presented)
        clean_path = _strip_key(split)

        if split.path == "/a2c/health" and self.command == "GET":
            if not authed:
                b, h = error_body(None, 401, "auth", "a2c driver gateway: missing or wrong "
                                  "gateway key")
                return self._send(401, b, h)
            info = {"ok": True, "driver": st.config["driver"], "model": st.model,
                    "wires": sorted(st.wires)}
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})

        def refuse(status: int, kind: str, message: str, *, model=None, stream=False,
                   generation=rt.generation):
            b, h = error_body(rt.wire, status, kind, message)
            self._send(status, b, h)
            st.ledger.record(wire=rt.wire, path=clean_path, model=model, stream=stream,
                             status=status, usage=None, latency_ms=None,
                             duration_ms=(time.perf_counter() - t0) * 1000, request=body,
                             response=b, error=kind, generation=generation, forwarded=False)

        if not authed:
            what = "a wrong gateway key" if presented else "no gateway key"
            return refuse(401, "auth", f"a2c driver gateway: the request carried {what}; "
                          "use the run's key from $A2C_DRIVER_KEY")
        if rt.wire is None:
            return refuse(404, "not_served", f"a2c driver gateway: no wire format serves "
                          f"{self.command} {split.path}")
        if rt.wire not in st.wires:
            return refuse(404, "not_served", f"a2c driver gateway: this run's driver "
                          f"{st.config['driver']} does not serve the {rt.wire} wire "
                          f"(it serves {', '.join(sorted(st.wires))})")
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        model = request_model(rt, parsed)
        stream = request_streams(rt, parsed, split.query)
        forward_body = body
        if rt.generation:
            if not isinstance(parsed, dict):
                return refuse(400, "bad_request", "a2c driver gateway: the request body is "
                              "not a JSON object", stream=stream)
            if not st.model_ok(model):
                return refuse(400, "model", f"a2c driver gateway: this run's driver model is "
                              f"{st.model}; the request named {model!r}", model=model,
                              stream=stream)
            spent = st.ledger.admit()
            if spent is not None:
                limit, cap, used = spent
                st.ledger.exhausted(limit, cap, used)
                return refuse(BUDGET_STATUS[rt.wire], "budget",
                              f"a2c driver gateway: the run's driver {limit} budget is spent "
                              f"({used:g} of {cap:g}); no further model calls in this run",
                              model=model, stream=stream)
            if rt.wire == "openai-chat" and stream and "stream_options" not in parsed:
                parsed["stream_options"] = {"include_usage": True}
                forward_body = json.dumps(parsed).encode()
        try:
            self._forward(st, rt, clean_path, body, forward_body, model, stream, t0)
        finally:
            if rt.generation:
                st.ledger.release()

    def _upstream_headers(self, st: GatewayState, rt: Route, length: int) -> dict[str, str]:
        out = {k: v for k, v in self.headers.items()
               if k.lower() not in HOP and k.lower() not in AUTH_HEADERS
               and k.lower() != "accept-encoding"}
        out["Host"] = st.upstream.host if st.upstream.port in (80, 443) else \
            f"{st.upstream.host}:{st.upstream.port}"
        out["Accept-Encoding"] = "identity"
        out["Content-Length"] = str(length)
        if st.provider_key:
            style = st.auth_style or WIRE_AUTH.get(rt.wire, "bearer")
            if style == "x-api-key":
                out["x-api-key"] = st.provider_key
            elif style == "x-goog-api-key":
                out["x-goog-api-key"] = st.provider_key
            else:
                out["Authorization"] = f"Bearer {st.provider_key}"
        return out

    def _forward(self, st: GatewayState, rt: Route, path: str, body: bytes, forward_body: bytes,
                 model: str | None, stream: bool, t0: float) -> None:
        up = st.upstream
        headers = self._upstream_headers(st, rt, len(forward_body))
        target = up.path_for(path)
        resp = conn = None
        try:
            for attempt in (0, 1):
                conn, reused = up.connect()
                try:
                    conn.request(self.command, target, body=forward_body if body or
                                 self.command in ("POST", "PUT") else None, headers=headers)
                    resp = conn.getresponse()
                    break
                except (http.client.RemoteDisconnected, BrokenPipeError,
                        ConnectionResetError) as exc:
                    conn.close()
                    if not reused or attempt:     # a fresh connection failed: give up
                        raise exc
        except TimeoutError:
            if conn:
                conn.close()
            return self._failed(st, rt, path, body, model, stream, t0, 504, "timeout",
                                f"a2c driver gateway: the upstream {up.base_url} did not answer "
                                f"within {up.timeout:g} s")
        except (OSError, http.client.HTTPException) as exc:
            if conn:
                conn.close()
            return self._failed(st, rt, path, body, model, stream, t0, 502, "upstream",
                                f"a2c driver gateway: the upstream {up.base_url} is unreachable "
                                f"({type(exc).__name__}: {exc})")
        latency = (time.perf_counter() - t0) * 1000
        # SSE is parsed event by event; a JSON answer (also Gemini's streamed JSON array
        # without alt=sse) whole at its end.
        ctype = resp.getheader("Content-Type") or ""
        meter = UsageMeter(rt.wire, "text/event-stream" in ctype or
                           (stream and "json" not in ctype))
        sent: list[bytes] = []
        error = None
        length = resp.getheader("Content-Length")
        chunked_out = length is None and self.request_version != "HTTP/1.0"
        try:
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            if length is not None:
                self.send_header("Content-Length", length)
            elif chunked_out:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.close_connection = True
            self.end_headers()
            self.wfile.flush()
            while True:
                try:
                    chunk = resp.read1(READ_CHUNK)
                except TimeoutError:
                    error = "timeout"
                    break
                except (OSError, http.client.HTTPException):
                    error = "upstream_broken"
                    break
                if not chunk:
                    break
                sent.append(chunk)
                meter.feed(chunk)
                if chunked_out:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    self.wfile.write(chunk)
                self.wfile.flush()
            if error is not None:
                # No terminating chunk: the client sees an incomplete answer, not a short one.
                self.close_connection = True
            elif chunked_out:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            error = error or "client_gone"
            self.close_connection = True
            if error == "client_gone":
                # The provider bills what it generates: read the rest for its usage fields.
                self._drain(resp, meter, sent)
        finally:
            if error is None and not resp.will_close and resp.isclosed():
                up.give_back(conn)
            else:
                conn.close()
        usage = meter.finish()
        status = resp.status
        if error is None and status >= 400:
            error = "upstream_status"
        st.ledger.record(wire=rt.wire, path=path, model=model, stream=stream, status=status,
                         usage=usage, latency_ms=latency,
                         duration_ms=(time.perf_counter() - t0) * 1000, request=body,
                         response=b"".join(sent), error=error, generation=rt.generation,
                         forwarded=True)

    @staticmethod
    def _drain(resp, meter: UsageMeter, sent: list[bytes]) -> None:
        try:
            while chunk := resp.read1(READ_CHUNK):
                meter.feed(chunk)
        except (OSError, http.client.HTTPException):
            pass

    def _failed(self, st, rt, path, body, model, stream, t0, status, kind, message) -> None:
        b, h = error_body(rt.wire, status, kind, message)
        try:
            self._send(status, b, h)
        except OSError:
            self.close_connection = True
        st.ledger.record(wire=rt.wire, path=path, model=model, stream=stream, status=status,
                         usage=None, latency_ms=None,
                         duration_ms=(time.perf_counter() - t0) * 1000, request=body,
                         response=b, error=kind, generation=rt.generation, forwarded=True)


def _strip_key(split: urllib.parse.SplitResult) -> str:
    """The request path without a `key=` query parameter (never forwarded nor recorded)."""
    if not split.query:
        return split.path
    pairs = [(k, v) for k, v in urllib.parse.parse_qsl(split.query, keep_blank_values=True)
             if k != "key"]
    return split.path + ("?" + urllib.parse.urlencode(pairs) if pairs else "")


def serve(run_dir: Path) -> int:
    """Run the gateway until SIGTERM/SIGINT; returns the exit status."""
    run_dir = run_dir.resolve()
    state = GatewayState(run_dir)
    paths = state.paths
    sock = Path(state.config.get("socket") or paths.driver_socket)
    sock.parent.mkdir(parents=True, exist_ok=True)
    if sock.exists() or sock.is_symlink():
        sock.unlink()
    server = _Server(str(sock), state)
    os.chmod(sock, 0o666)           # the agent runs as another (unprivileged) user
    state.ledger.write_totals()
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    paths.driver_pid.write_text(str(os.getpid()))
    write_json_atomic(paths.driver_ready, {"pid": os.getpid(), "socket": str(sock),
                                           "driver": state.config["driver"],
                                           "model": state.model,
                                           "upstream": state.upstream.base_url})
    print(f"driver gateway: {state.config['driver']} on {sock} -> {state.upstream.base_url}",
          flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        state.ledger.close()
        for p in (sock, paths.driver_ready):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m a2c.runtime.driver_gateway RUN_DIR", file=sys.stderr)
        return 2
    return serve(Path(argv[0]))
