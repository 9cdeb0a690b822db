"""The driver gateway process: an HTTP/1.1 server on the run's Unix socket that passes the
agent's model calls to the configured upstream, and meters, limits and records each one.

    python -m a2c.runtime.driver_gateway RUN_DIR     # reads RUN/driver/gateway.json

Per request: the per-run key is checked (any of the four header styles, or `?key=`); the
request target must be one route of the allow-list (routes.check_target: generation, token
counting, and model lists the gateway answers itself); the body is read once, strictly
(a2c.wires.strict: a key twice, NaN, not UTF-8 are refused); the model named must be one of the
run's pinned ids; a generation call's cost fields must read one way (`Wire.read_request`: caps
and counts JSON integers in range, unmetered tiers and outside input refused) and it is admitted
by the ledger, which reserves its worst case (admission) and lowers its output cap to what the
budget has left. Then the gateway's own serialization of what it admitted (never the agent's
bytes) goes upstream with the provider's key in place of the run key and only the allowed
headers, and the
answer comes back chunk by chunk as it arrives (an SSE stream is never buffered whole) while
`UsageMeter` reads the usage fields out of the passing bytes. Everything the gateway answers
itself (refusals, upstream failures) is a body in the wire's own error format, and everything
is recorded by the `Ledger`; nothing refused ever reaches the upstream (but the provider's count
of a call whose input bound did not fit the budget: admission.admit). A forwarded call is a
`Flight` (flights.py) while it runs: the gateway's stop (SIGTERM, the run's end) cuts and records
every call still in flight, charged at least its reservation, before it closes the record.

Connections are bounded (a2c/connlimit.py, as the grader service's): at most
`MAX_CONNECTIONS` open; over it the one idle longest is closed, so an agent that opens thousands
of connections costs a bounded number of threads and descriptors and its next call is answered.
No idle timeout: a scaffold keeps its connection while its tools run for minutes.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from functools import partial
from pathlib import Path
from typing import Any

from a2c.connlimit import BoundedHandler, BoundedMixin, ConnectionLimiter, DropLog
from a2c.fsutil import write_json_atomic
from a2c.unixhttp import Handler, UnixServer, listen_unix, token_matches
from a2c.wires import WIRES, error_body, looks_like_path, request_streams, strict
from a2c.wires.reading import UsageMeter

from . import admission
from .admission import Reservation
from .flights import CutError, Flight, Forwarded, record, record_failed
from .routes import Refused, Target, check_target
from .state import GatewayState, model_list

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
       "trailers", "transfer-encoding", "upgrade", "host", "content-length", "expect"}
READ_CHUNK = 65536
MAX_BODY = 64 * 1024 * 1024
MAX_CONNECTIONS = 128    # a scaffold holds a few; each is a thread and a descriptor here
KEY_HEADERS = ("api-key", *sorted({w.auth for w in WIRES.values() if w.auth != "bearer"}))
"""Run-key headers besides `Authorization: Bearer`: each wire's (`Wire.auth`), Azure's `api-key`."""
STOPPING = ("a2c driver gateway: the gateway is stopping (the run is over); the call was not "
            "finished")


class _Server(BoundedMixin, UnixServer):
    state: GatewayState      # set by listen_unix


class _Handler(BoundedHandler, Handler):
    server_version = "a2c-driver-gateway/1"
    peer = "agent"

    # Every method reaches _handle, so whatever the agent sends is refused in the wire's shape
    # and recorded; only the allow-listed (method, path) pairs are forwarded.
    def _any_method(self):
        if self.command == "HEAD":
            self.close_connection = True      # the refusal's body is not framed for HEAD
        self._handle()

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_OPTIONS = do_HEAD = _any_method

    # ------------------------------------------------------------------ helpers
    def _presented_keys(self, query_keys: list[str]) -> list[str]:
        """Every key the request carries (a client may send more than one header style)."""
        h = self.headers
        keys: list[str] = []
        for name in KEY_HEADERS:
            keys += [v.strip() for v in h.get_all(name) or [] if v.strip()]
        for auth in h.get_all("Authorization") or []:
            if auth.lower().startswith("bearer ") and auth[7:].strip():
                keys.append(auth[7:].strip())
        return keys + [k for k in query_keys if k]

    def _send(self, status: int, body: bytes, headers: dict) -> None:
        self.send_body(status, body, headers)

    # ------------------------------------------------------------------ one request
    def _handle(self) -> None:
        st: GatewayState = self.server.state
        t0 = time.perf_counter()
        body = self.read_body()
        raw_path, _, raw_query = self.path.partition("?")
        query_keys = [v for k, v in urllib.parse.parse_qsl(raw_query, keep_blank_values=True)
                      if k == "key"]
        presented = self._presented_keys(query_keys)
        authed = any(token_matches(k, st.key) for k in presented)

        if raw_path == "/a2c/health" and self.command == "GET":
            if not authed:
                b, h = error_body(None, 401, "auth", "a2c driver gateway: missing or wrong "
                                  "gateway key")
                return self._send(401, b, h)
            info = {"ok": True, "driver": st.config.driver, "model": st.model,
                    "wires": sorted(st.wires)}
            return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})

        target = check_target(self.command, self.path)
        if isinstance(target, Target):
            rt, path = target.route, target.path
        else:
            rt, path = None, target.path
        wire = rt.wire if rt else looks_like_path(path, st.default_wire)

        def refuse(status: int, kind: str, message: str, *, model=None, stream=False):
            b, h = error_body(wire, status, kind, message)
            self._send(status, b, h)
            st.ledger.record(wire=wire, path=path, model=model, stream=stream,
                             status=status, usage=None, latency_ms=None,
                             duration_ms=(time.perf_counter() - t0) * 1000, request=body,
                             response=b, error=kind, generation=bool(rt and rt.generation),
                             forwarded=False)

        if not authed:
            what = "a wrong gateway key" if presented else "no gateway key"
            return refuse(401, "auth", f"a2c driver gateway: the request carried {what}; "
                          "use the run's key from $A2C_DRIVER_KEY")
        if isinstance(target, Refused):
            return refuse(target.status, target.kind, target.message)
        assert rt is not None
        if rt.wire not in st.wires:
            return refuse(404, "not_served", f"a2c driver gateway: this run's driver "
                          f"{st.config.driver} does not serve the {rt.wire} wire "
                          f"(it serves {', '.join(sorted(st.wires))})")
        if rt.kind == "models":
            if rt.path_model is not None and not st.model_ok(rt.path_model):
                return refuse(404, "not_served", f"a2c driver gateway: no model "
                              f"{rt.path_model!r} in this run (it may name "
                              f"{', '.join(st.allowed)})")
            return self._models(st, rt, path, body, t0)
        return self._call(st, rt, path, body, t0, refuse)

    def _call(self, st: GatewayState, rt, path: str, body: bytes, t0: float, refuse) -> None:
        """A generation or token-counting call on its one reading (issue 32): strict JSON (a
        key twice, NaN, not UTF-8: refused), checked and admitted as read, and forwarded as the
        gateway's own serialization of it."""
        try:
            parsed: Any = strict.read(body) if body else None
        except strict.Unreadable as exc:
            return refuse(400, "bad_request", f"a2c driver gateway: {exc}")
        if not isinstance(parsed, dict):
            return refuse(400, "bad_request", "a2c driver gateway: the request body is not a "
                          "JSON object")
        model = rt.path_model or parsed.get("model")
        stream = request_streams(rt, parsed)
        if not isinstance(model, str) or not st.model_ok(model):
            return refuse(400, "model", f"a2c driver gateway: this run's driver model is "
                          f"{st.model} (it may name {', '.join(st.allowed)}); the request "
                          f"named {model!r}", model=model if isinstance(model, str) else None,
                          stream=stream)
        res: Reservation | None = None
        if not rt.generation:
            forward = strict.encode(parsed)
        else:
            if named := WIRES[rt.wire].provider_tools(parsed):
                return refuse(400, "bad_request", "a2c driver gateway: the request asks for "
                              f"provider-side tools ({', '.join(named)}) that the gateway "
                              "cannot meter and that reach the network; use the agent's own "
                              "tools", model=model, stream=stream)
            try:
                reading = admission.read_request(rt.wire, parsed)
            except strict.Unreadable as exc:
                return refuse(400, "bad_request", f"a2c driver gateway: {exc}", model=model,
                              stream=stream)
            room = partial(st.context_room, wire=rt.wire, path=path) if st.context else None
            got = admission.admit(st.ledger, rt.wire, parsed, reading, stream,
                                  st.upstream.timeout, st.bounded,
                                  lambda: self._count_input(st, rt, path, parsed), room)
            if got is None:
                return refuse(503, "upstream", STOPPING, model=model, stream=stream)
            if not isinstance(got, tuple):
                return refuse(WIRES[rt.wire].budget_status, "budget", got, model=model,
                              stream=stream)
            res, forward = got
        try:
            self._forward(st, rt, path, forward, model, stream, t0, res)
        finally:
            st.ledger.release(res)

    def _models(self, st: GatewayState, rt, path: str, body: bytes, t0: float) -> None:
        """A model list (or card) of the run's pinned ids, answered here, never forwarded."""
        data = json.dumps(model_list(st.allowed, rt.path_model)).encode()
        self._send(200, data, {"Content-Type": "application/json"})
        st.ledger.record(wire=rt.wire, path=path, model=rt.path_model, stream=False,
                         status=200, usage=None, latency_ms=None,
                         duration_ms=(time.perf_counter() - t0) * 1000, request=body,
                         response=data, error=None, generation=False, forwarded=False)

    def _count_input(self, st: GatewayState, rt, path: str, parsed: dict) -> int | None:
        """The provider's count of a request's input tokens, from its counting route (None
        without one, or when it fails). Free at every provider; not a call of the agent's, so
        not an event: a line in the gateway's log."""
        wire = WIRES[rt.wire]
        asked = wire.count_request(parsed, path)
        if asked is None:
            return None
        target, data = asked[0], strict.encode(asked[1])
        answer = st.upstream.ask(target, data, st.upstream.headers(
            self.headers.items(), rt.wire, st.auth_style, st.provider_key, len(data)))
        counted = wire.count_of(answer)
        print(f"input of a call over its bound: {target} counted {counted}", flush=True)
        return counted

    def _forward(self, st: GatewayState, rt, path: str, forward: bytes, model: str,
                 stream: bool, t0: float, res: Reservation | None) -> None:
        up = st.upstream
        headers = up.headers(self.headers.items(), rt.wire, st.auth_style, st.provider_key,
                             len(forward))
        flight = Flight(self.connection, Forwarded(rt.wire, path, model, stream, t0, forward,
                                                   rt.generation, res))
        try:
            st.flights.start(flight)
        except CutError:
            return self._failed(st, flight, 503, "cut", STOPPING, forwarded=False)
        try:
            self._forward_in_flight(st, rt, flight, forward, headers)
        finally:
            st.flights.end(flight)

    def _forward_in_flight(self, st: GatewayState, rt, flight: Flight, forward: bytes,
                           headers: dict) -> None:
        up = st.upstream
        path, stream = flight.info.path, flight.info.stream
        try:
            resp, conn = up.send("POST", path, forward, headers, attach=flight.attach)
        except (OSError, http.client.HTTPException) as exc:
            if flight.cut:
                return self._failed(st, flight, 503, "cut", STOPPING)
            if isinstance(exc, TimeoutError):
                return self._failed(st, flight, 504, "timeout", f"a2c driver gateway: the "
                                    f"upstream {up.base_url} did not answer within "
                                    f"{up.timeout:g} s")
            return self._failed(st, flight, 502, "upstream", f"a2c driver gateway: the "
                                f"upstream {up.base_url} is unreachable "
                                f"({type(exc).__name__}: {exc})")
        flight.latency_ms = (time.perf_counter() - flight.info.t0) * 1000
        flight.status = resp.status
        # SSE is parsed event by event; a JSON answer (also Gemini's streamed JSON array
        # without alt=sse) whole at its end.
        ctype = resp.getheader("Content-Type") or ""
        flight.meter = meter = UsageMeter(rt.wire, "text/event-stream" in ctype or
                                          (stream and "json" not in ctype))
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
            error = self._relay(resp, meter, flight, chunked_out)
        except (BrokenPipeError, ConnectionResetError, OSError):
            error = error or "client_gone"
            self.close_connection = True
            if error == "client_gone":
                # The provider bills what it generates: read the rest for its usage fields.
                if not self._drain(resp, meter):
                    error = "client_gone_upstream_broken"
        finally:
            if error is None and not resp.will_close and resp.isclosed() and not flight.cut:
                up.give_back(conn)
            else:
                conn.close()
        if flight.cut:       # the gateway's stop ended it (the run's end), not the upstream
            gone = not flight.client_cut and ((error or "").startswith("client_gone") or
                                              flight.client_left())
            error = "client_gone_cut" if gone else "cut"
        if flight.claim():
            record(st.ledger, flight, error)

    def _relay(self, resp, meter: UsageMeter, flight: Flight, chunked_out: bool) -> str | None:
        """Pass the answer on chunk by chunk; the upstream's failure (or the stop's cut), or
        None."""
        error, sent = None, flight.sent
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
                error = "cut" if flight.cut else None
                break
            sent.append(chunk)
            meter.feed(chunk)
            if chunked_out:
                self.write_chunk(chunk)
            else:
                self.wfile.write(chunk)
                self.wfile.flush()
        if error is not None:
            # No terminating chunk: the client sees an incomplete answer, not a short one.
            self.close_connection = True
        elif chunked_out:
            self.end_chunks()
        return error

    @staticmethod
    def _drain(resp, meter: UsageMeter) -> bool:
        try:
            while chunk := resp.read1(READ_CHUNK):
                meter.feed(chunk)
            return True
        except (OSError, http.client.HTTPException):
            return False

    def _failed(self, st: GatewayState, flight: Flight, status: int, kind: str, message: str,
                *, forwarded: bool = True) -> None:
        """A call the upstream did not answer (unreachable, silent, or cut by the gateway's
        stop before its answer): the wire's error to the agent, and the record."""
        b, h = error_body(flight.info.wire, status, "upstream" if kind == "cut" else kind, message)
        try:
            self._send(status, b, h)
        except OSError:
            self.close_connection = True
        if flight.claim():
            record_failed(st.ledger, flight, status, kind, b, forwarded)


def serve(run_dir: Path) -> int:
    """Run the gateway until SIGTERM/SIGINT; returns the exit status."""
    run_dir = run_dir.resolve()
    state = GatewayState(run_dir)
    paths = state.paths
    sock = Path(state.config.socket or paths.driver_socket)
    # 0666: the agent runs as another (unprivileged) user
    server = listen_unix(sock, _Handler, mode=0o666, server_cls=_Server, state=state)
    server.limiter = ConnectionLimiter(MAX_CONNECTIONS, DropLog(
        "driver gateway", log=lambda line: print(line, flush=True)))
    state.ledger.write_totals()
    def on_signal(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    paths.driver_pid.write_text(str(os.getpid()))
    write_json_atomic(paths.driver_ready, {"pid": os.getpid(), "socket": str(sock),
                                           "driver": state.config.driver,
                                           "model": state.model,
                                           "upstream": state.upstream.base_url})
    print(f"driver gateway: {state.config.driver} on {sock} -> {state.upstream.base_url}",
          flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        # Every call still in flight is cut and recorded (charged at least its reservation)
        # before the record is closed: a run's end leaves no call uncounted.
        state.ledger.stop()
        cut = state.flights.stop(lambda flight: record(state.ledger, flight, "cut"))
        if cut:
            print(f"driver gateway: stopped with {cut} call(s) in flight, cut and recorded",
                  flush=True)
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
