"""HTTP front of the grader service: JSON over TCP loopback and/or a Unix socket, bearer token.

Standard library only (`http.server`): a handful of endpoints, one client at a time in practice,
and no dependency the sandboxed agent's side would also need. Connections are bounded in number
and time (a2c/connlimit.py: `max_connections` per listener, `request_timeout_s` idle); the socket
is 0660 (group `socket_gid` when set: the sandboxed agent's).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socketserver
import sys
import threading
import time
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.connlimit import BoundedHandler, BoundedMixin, ConnectionLimiter, DropLog
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import ServiceConfig
from a2c.fsutil import write_bytes_atomic
from a2c.runtime.grader_service.common import ReadyInfo
from a2c.runtime.grader_service.core import GraderService, Refusal, log
from a2c.settings import get_bool
from a2c.unixhttp import Handler as BaseHandler
from a2c.unixhttp import LoopbackServer, listen_unix, serve_in_thread, token_matches
from a2c.unixhttp import UnixServer as BaseUnixServer

MAX_BODY = 64 * 1024


class Handler(BoundedHandler, BaseHandler):
    server_version = "a2c-grader/1"
    service: GraderService  # set on the subclass made per server
    timeout = 10.0           # idle seconds before the connection is closed (request_timeout_s)

    def log_message(self, format: str, *args: Any) -> None:
        if get_bool("A2C_GRADER_ACCESS_LOG"):
            log(f"{self.address_string()} {format % args}")

    # ---------------------------------------------------------------- plumbing
    def _send(self, status: int, body: dict[str, Any]) -> None:
        self.send_json(status, body, {"Cache-Control": "no-store"}, ensure_ascii=False,
                       newline=True)

    def _refuse(self, refusal: Refusal) -> None:
        self._send(refusal.status, refusal.body())

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return token_matches(token.strip(), self.service.cfg.token) and scheme.lower() == "bearer"

    def _read_body(self) -> bytes | Refusal:
        """Read the whole body (so a refused request leaves the connection usable)."""
        length = self.headers.get("Content-Length")
        if length is None:
            return Refusal(400, "bad_request", "the request needs a Content-Length and a JSON body")
        try:
            n = int(length)
        except ValueError:
            self.close_connection = True
            return Refusal(400, "bad_request", "bad Content-Length")
        if n > MAX_BODY or n < 0:
            self.close_connection = True
            return Refusal(400, "bad_request", f"request body over {MAX_BODY} bytes",
                           limit=MAX_BODY)
        return self.rfile.read(n)

    @staticmethod
    def _parse(raw: bytes | Refusal) -> Any:
        if isinstance(raw, Refusal):
            raise raw
        try:
            return json.loads(raw or b"null")
        except ValueError as exc:
            raise Refusal(400, "bad_request",
                          f"the request body is not valid JSON: {exc}") from None

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        try:
            raw = self._read_body() if method == "POST" else b""
            if path == "/health" and method == "GET":
                self._send(200, {"ok": True})
                return
            if not self._authorized():
                raise Refusal(401, "unauthorized",
                              "missing or wrong bearer token (set A2C_TOKEN)")
            if method == "POST" and path == "/submit":
                self._send(202, self.service.submit(self._parse(raw)))
            elif method == "GET" and path == "/submissions":
                self._send(200, self.service.list())
            elif method == "GET" and path.startswith("/submissions/"):
                raw = path[len("/submissions/"):]
                if not raw.isdigit():
                    raise Refusal(400, "bad_request",
                                  f"submission id must be a number, not {raw!r}")
                self._send(200, self.service.get(int(raw)))
            elif method == "GET" and path == "/time":
                with self.service.lock:
                    self._send(200, self.service.limits().to_dict())
            else:
                raise Refusal(404, "not_found", f"no endpoint {method} {path}")
        except Refusal as refusal:
            self._refuse(refusal)
        except Exception as exc:  # never let one request take a thread's connection down silently
            log(f"internal error on {method} {path}: {exc!r}")
            self._send(500, {"error": "internal", "message": str(exc), "limit": None})

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")


class TCPServer(BoundedMixin, LoopbackServer):
    pass


class UnixServer(BoundedMixin, BaseUnixServer):
    pass


def _handler_for(service: GraderService) -> type[Handler]:
    return type("BoundHandler", (Handler,), {"service": service,
                                             "timeout": service.cfg.request_timeout_s})


def _bound(server: BoundedMixin, cfg: ServiceConfig, name: str) -> DropLog:
    drops = DropLog(name, log=log)
    server.limiter = ConnectionLimiter(cfg.max_connections, drops)
    return drops


def _write_ready(path: Path, info: ReadyInfo) -> None:
    write_bytes_atomic(path, canonical_json(info.to_dict()) + b"\n", mode=0o600)


def serve(run_dir: str | Path) -> int:
    cfg = ServiceConfig.load(run_dir)
    ready = RunPaths(cfg.run_dir).ready
    try:
        ready.unlink()
    except FileNotFoundError:
        pass
    service = GraderService(cfg)
    handler = _handler_for(service)
    servers: list[socketserver.BaseServer] = []
    drops: list[DropLog] = []
    info = ReadyInfo(pid=os.getpid(), started_at=time.time())
    if cfg.socket_path:
        sock_path = Path(cfg.socket_path)
        # created 0660, never 0666 even briefly; group socket_gid when set: the sandboxed agent
        # runs as another uid, in this group
        unix = listen_unix(sock_path, handler, mode=0o660, gid=cfg.socket_gid,
                           server_cls=UnixServer)
        drops.append(_bound(unix, cfg, "unix"))
        servers.append(unix)
        info.socket_path, info.unix_url = str(sock_path), f"unix:{sock_path}"
    if cfg.port is not None:
        tcp = TCPServer((cfg.host or "127.0.0.1", int(cfg.port)), handler)
        drops.append(_bound(tcp, cfg, "tcp"))
        host, port = tcp.server_address[:2]
        servers.append(tcp)
        info.host, info.port, info.url = host, port, f"http://{host}:{port}"
    for i, s in enumerate(servers):
        serve_in_thread(s, f"http-{i}", poll_interval=0.2)
    service.start()
    stop = threading.Event()
    signals = itertools.count(1)

    def on_signal(signum: int, frame: Any) -> None:
        if next(signals) == 1:
            log(f"{signal.Signals(signum).name}: finishing the running evaluation, then exiting")
            service.stop()
        else:
            log("second signal: stopping the running evaluation now")
            service.stop(kill_running=True)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _write_ready(ready, info)
    log(f"listening on {', '.join(info.urls)}; "
        f"{len(service.subs)} submissions in the journal")
    while not stop.wait(0.5):
        for d in drops:
            d.flush(force=False)
    for d in drops:
        d.flush()
    while service.worker.is_alive():
        service.join(0.5)
    for s in servers:
        s.shutdown()
        s.server_close()
    if cfg.socket_path:
        try:
            os.unlink(cfg.socket_path)
        except OSError:
            pass
    try:
        ready.unlink()
    except FileNotFoundError:
        pass
    log("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        sys.stderr.write("usage: python -m a2c.runtime.grader_service RUN_DIR\n"
                         "Serves the grading API for one run "
                         "(reads RUN_DIR/grader/service.json).\n")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    try:
        return serve(argv[0])
    except Exception as exc:
        from a2c.errors import A2CError

        if isinstance(exc, A2CError):
            sys.stderr.write(f"a2c grader: {exc}\n")
            return exc.exit_code
        raise

