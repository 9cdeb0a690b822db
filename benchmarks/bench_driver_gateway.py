"""The driver gateway's added latency per call: agent -> loopback forwarder -> gateway (Unix
socket) -> upstream, against the same client calling the same loopback upstream directly.

Both paths run side by side in one process, interleaved call by call (so machine load hits both
alike), for an Anthropic Messages call answered as JSON and as an SSE stream of a few events.
Every call is fully metered and recorded by the gateway (events.jsonl, blobs, totals.json), as in
a run, and admitted against token and cost budgets (a worst-case reservation, then the metered
usage in its place), with the route, header and model allow-lists checked. Prints per path the median and p90 of the whole call (request sent -> last byte read), the
added latency (gateway median - direct median) and the ratio. Target: added median < 5 ms.

A third mode, `large`, sends a conversation of an agent some way into its task (120 messages of
content blocks, tool calls and tool results: about 137 KB of JSON, with non-ASCII text) as JSON:
the gateway's strict reading (duplicate keys, integer caps), its canonical re-serialization and
its input bound are paid per call in proportion to the body, and this mode shows what they cost.

Usage: python benchmarks/bench_driver_gateway.py [CALLS]      (default 300 per path and mode)
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "claude-sonnet-4-5"
USAGE = {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 3000,
         "cache_creation_input_tokens": 0}
ANSWER = json.dumps({"id": "m", "type": "message", "role": "assistant", "model": MODEL,
                     "content": [{"type": "text", "text": "x" * 400}],
                     "stop_reason": "end_turn", "usage": USAGE}).encode()


def _sse() -> bytes:
    def ev(name, obj):
        return f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode()
    out = [ev("message_start", {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "model": MODEL,
        "usage": {**USAGE, "output_tokens": 1}}})]
    out += [ev("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": "tok " * 10}})
            for _ in range(8)]
    out += [ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                 "usage": {"output_tokens": 80}}),
            ev("message_stop", {"type": "message_stop"})]
    return out


EVENTS = _sse()


def _large_messages() -> list[dict]:
    """An agent's conversation some way in: 120 messages, about 137 KB of JSON (tool calls with
    code, tool results with file contents, a little non-ASCII text)."""
    code = "def f(x):\n    return [i * x for i in range(10)]  # é ü 数据\n" * 30
    out: list[dict] = [{"role": "user", "content": "Fine-tune the model; report the score. " * 20}]
    for i in range(60):
        out.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {i}: reading the file and running the tests."},
            {"type": "tool_use", "id": f"toolu_{i:04d}", "name": "bash",
             "input": {"command": f"cat src/module_{i}.py && pytest -q tests/test_{i}.py"}}]})
        out.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:04d}", "content": code}]})
    return out


LARGE = _large_messages()


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True      # as a real server does: no 40 ms Nagle/delayed-ACK stall

    def log_message(self, *a):
        pass

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(ANSWER)))
            self.end_headers()
            self.wfile.write(ANSWER)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for e in EVENTS:                       # one write per event, as a provider streams
            self.wfile.write(b"%x\r\n%s\r\n" % (len(e), e))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def _call(conn: http.client.HTTPConnection, headers: dict, stream: bool,
          large: bool = False) -> float:
    messages = LARGE if large else [{"role": "user", "content": "hello " * 200}]
    body = json.dumps({"model": MODEL, "stream": stream, "max_tokens": 64,
                       "messages": messages}, ensure_ascii=False).encode()
    t = time.perf_counter()
    conn.request("POST", "/v1/messages", body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    elapsed = time.perf_counter() - t
    assert resp.status == 200 and data, (resp.status, data[:200])
    return elapsed * 1000


class _UnixConnection(http.client.HTTPConnection):
    """The gateway's socket straight (the forwarder's share is the difference)."""

    def __init__(self, path: str):
        super().__init__("localhost", timeout=30)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(calls: int = 300) -> int:
    from a2c.contracts.run_paths import RunPaths
    from a2c.runtime.driver_gateway import DriverGatewayProcess, prepare_gateway, read_totals

    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    up_port = server.server_address[1]
    with tempfile.TemporaryDirectory(prefix="a2c-bench-gw-") as tmp:
        tmp = Path(tmp)
        os.environ["A2C_RECORD_KEY_FILE"] = str(tmp / "record.key")
        os.environ["A2C_DRIVER_BENCH_BASE_URL"] = f"http://127.0.0.1:{up_port}"
        os.environ["A2C_DRIVER_BENCH_KEY_ENV"] = "BENCH_PROVIDER_KEY"
        os.environ["A2C_DRIVER_BENCH_WIRES"] = "anthropic"
        os.environ["BENCH_PROVIDER_KEY"] = "sk-bench"
        os.environ.setdefault("A2C_DRIVERS_FILE", str(tmp / "none.yaml"))
        (tmp / "none.yaml").write_text("providers: {}\n")
        run = tmp / "run"
        (run / "logs").mkdir(parents=True)
        paths = RunPaths(run)
        # token and cost budgets far above what the bench spends: every call goes through
        # admission (a worst-case reservation under the ledger's lock) as in a budgeted run
        prepare_gateway(paths, f"bench/{MODEL}", {"driver": {"wire": "anthropic"}},
                        {"driver_tokens": 10**10, "driver_cost_usd": 10**6})
        gw = DriverGatewayProcess(run)
        gw.start()
        key = paths.driver_key.read_text().strip()
        fwd = subprocess.Popen([sys.executable, "-m", "a2c.runtime.sandbox.loopback_forwarder",
                                "--socket", str(paths.driver_socket)],
                               stdout=subprocess.PIPE, text=True)
        try:
            fwd_port = int(fwd.stdout.readline().strip().rsplit(":", 1)[1])
            direct = http.client.HTTPConnection("127.0.0.1", up_port, timeout=30)
            via = http.client.HTTPConnection("127.0.0.1", fwd_port, timeout=30)
            for conn in (direct, via):
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            h_direct = {"Content-Type": "application/json", "x-api-key": "sk-bench",
                        "anthropic-version": "2023-06-01"}
            unix = _UnixConnection(str(paths.driver_socket))
            h_via = {**h_direct, "x-api-key": key}
            results = {}
            for mode in ("json", "sse", "large"):
                stream, large = mode == "sse", mode == "large"
                for _ in range(20):                  # warm up every path
                    _call(direct, h_direct, stream, large)
                    _call(via, h_via, stream, large)
                    _call(unix, h_via, stream, large)
                d, g, u = [], [], []
                for _ in range(calls):
                    d.append(_call(direct, h_direct, stream, large))
                    g.append(_call(via, h_via, stream, large))
                    u.append(_call(unix, h_via, stream, large))
                results[mode] = (d, g, u)
            direct.close()
            via.close()
            unix.close()
            deadline = time.monotonic() + 30
            expected = 6 * (calls + 20)
            while read_totals(run).get("calls", 0) < expected and time.monotonic() < deadline:
                time.sleep(0.05)
            totals = read_totals(run)
        finally:
            fwd.kill()
            gw.stop()
            server.shutdown()
    print(f"driver gateway added latency, {calls} calls per path and mode, loopback upstream "
          f"(forwarder TCP -> gateway Unix socket -> upstream TCP), recorded and metered")
    print(f"{'mode':5} {'direct med':>11} {'direct p90':>11} {'gateway med':>12} "
          f"{'gateway p90':>12} {'added med':>10} {'added p90':>10} {'ratio':>6}")
    worst = 0.0
    for mode, (d, g, _u) in results.items():
        dm, gm = statistics.median(d), statistics.median(g)
        added = [b - a for a, b in zip(d, g)]
        am = statistics.median(added)
        worst = max(worst, am)
        print(f"{mode:5} {dm:9.2f}ms {_pct(d, .9):9.2f}ms {gm:10.2f}ms {_pct(g, .9):10.2f}ms "
              f"{am:8.2f}ms {_pct(added, .9):8.2f}ms {gm / dm:5.2f}x")
    for mode, (d, _g, u) in results.items():
        print(f"{mode:5} gateway socket alone (no forwarder): median "
              f"{statistics.median(u):.2f}ms, p90 {_pct(u, .9):.2f}ms; added median "
              f"{statistics.median([b - a for a, b in zip(d, u)]):.2f}ms")
    print(f"large body: {len(json.dumps(LARGE, ensure_ascii=False).encode()) // 1024} KB of "
          f"messages")
    print(f"recorded calls: {totals.get('calls')} (expected {expected}); tokens "
          f"{totals.get('tokens')}; cost ${totals.get('cost_usd'):.4f}")
    print(f"target: added median < 5 ms -> {'met' if worst < 5 else 'NOT met'} "
          f"(worst {worst:.2f} ms)")
    return 0 if totals.get("calls") == expected else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
