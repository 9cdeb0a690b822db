"""The environment service proxy: the agent's door to a task's environment service, limited to
its training split. (Not the driver gateway, `runtime/driver_gateway/`: that one meters driver-model calls.)

A level-3 agent collects its own trajectories, so it needs the environment of its training split
(issue: "the agent's workspace gets what it needs"). A TextWorld or ALFWorld game is a file; a
WebShop episode is a session on the WebShop server, which the runtime runs outside the sandbox
(`runtime/env_services/process.py`) and which the sandbox's own network namespace cannot reach. And the server
serves every instruction, held-out ones included. So the runtime puts a proxy between them:

    proxy = EnvServiceProxy(RUN/"env-sockets"/"webshop.sock", "http://127.0.0.1:3000", allow)
    proxy.start()         # the socket's folder is mounted at /run/a2c/env in the sandbox
    ...
    proxy.stop()

an HTTP proxy on a Unix socket that forwards a request to the service only when `allow(path)`
says the path belongs to the agent's split (WebShop: the session id in it is one of the agent
split's records, `WebShopKind.agent_path_filter`), and answers 403 otherwise. Inside the sandbox
`$A2C_SERVICE_URL_<NAME>` (`unix:/run/a2c/env/<name>.sock`) names it, and the adapter uses it
ahead of its configured URL, so the workspace's `l3/rollout_example.py` plays training sessions
unchanged. Every request is logged (method, path, status) to the run's logs
(`logs/gateway-<name>.log`, a run-directory file name kept from before the rename). The
answers the proxy makes itself still say "a2c gateway" (what the agent has always read).

The proxy runs as threads of the runtime itself, so its connections are bounded
(a2c/connlimit.py: `MAX_CONNECTIONS` open, the one idle longest closed to make room, a request
line awaited `REQUEST_TIMEOUT_S` at most): an agent that floods the socket cannot take the
runtime's threads or descriptors.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from a2c.connlimit import BoundedHandler, BoundedMixin, ConnectionLimiter, DropLog
from a2c.contracts.spec import TaskSpec
from a2c.unixhttp import Handler, UnixServer, listen_unix, remove_stale, serve_in_thread

INSIDE_DIR = "/run/a2c/env"
PASS_HEADERS = ("Content-Type", "Location", "Content-Encoding")
MAX_CONNECTIONS = 64      # the adapters make one request a connection (HTTP/1.0)
REQUEST_TIMEOUT_S = 30.0  # a connection that sends nothing (or too slowly) is closed


def service_url_var(service: str) -> str:
    """`A2C_SERVICE_URL_<NAME>`: the variable that names a service's proxy inside the sandbox."""
    name = "".join(c if c.isalnum() else "_" for c in service).upper()
    return f"A2C_SERVICE_URL_{name}"


def path_segments(path: str) -> list[str]:
    """A request path's segments, percent-decoded (the query string dropped)."""
    raw = urllib.parse.urlsplit(path).path.strip("/")
    return [urllib.parse.unquote(p) for p in raw.split("/")] if raw else []


class _Server(BoundedMixin, UnixServer):
    proxy: EnvServiceProxy      # set by listen_unix


class _Handler(BoundedHandler, Handler):     # quiet: the proxy keeps its own log
    server_version = "a2c-gateway/1"
    protocol_version = "HTTP/1.0"
    peer = "agent"
    timeout = REQUEST_TIMEOUT_S

    def do_GET(self):  # noqa: N802 - http.server naming
        self._forward("GET")

    def do_POST(self):  # noqa: N802
        self._forward("POST")

    def _forward(self, method: str) -> None:
        proxy: EnvServiceProxy = self.server.proxy
        body = None
        if method == "POST":
            body = self.read_body()
        segments = path_segments(self.path)
        if ".." in segments or not proxy.allow(self.path):
            proxy.record(method, self.path, 403)       # counted before the agent hears back
            self._reply(403, b"a2c gateway: this path is outside the agent's training split\n",
                        {"Content-Type": "text/plain; charset=utf-8"})
            return
        try:
            conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=proxy.timeout)
            try:
                headers = {"Content-Type": self.headers["Content-Type"]} \
                    if self.headers.get("Content-Type") else {}
                conn.request(method, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                passed = {k: resp.getheader(k) for k in PASS_HEADERS if resp.getheader(k)}
                status = resp.status
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as exc:
            proxy.record(method, self.path, 502)
            self._reply(502, f"a2c gateway: service unreachable: {exc}\n".encode(),
                        {"Content-Type": "text/plain; charset=utf-8"})
            return
        proxy.record(method, self.path, status)
        self._reply(status, data, passed)

    def _reply(self, status: int, data: bytes, headers: dict) -> None:
        self.send_body(status, data, headers)


class EnvServiceProxy:
    """An allow-listing HTTP proxy from a Unix socket to a service on loopback (see module doc)."""

    def __init__(self, socket_path: Path, upstream: str, allow: Callable[[str], bool], *,
                 log_path: Path | None = None, timeout: float = 60.0):
        url = urllib.parse.urlsplit(upstream)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"proxy upstream must be an http:// URL, got {upstream!r}")
        self.socket_path = Path(socket_path)
        self.host, self.port = url.hostname, url.port or 80
        self.allow = allow
        self.timeout = timeout
        self.log_path = log_path
        self.counts = {"forwarded": 0, "denied": 0, "failed": 0}
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> EnvServiceProxy:
        # 0666: the agent may run as another user (docker)
        self._server = listen_unix(self.socket_path, _Handler, mode=0o666, server_cls=_Server,
                                   proxy=self)
        self._server.limiter = ConnectionLimiter(MAX_CONNECTIONS, DropLog(
            f"environment service proxy {self.socket_path.stem}", log=self._log_line))
        self._thread = serve_in_thread(self._server, f"env-proxy-{self.socket_path.stem}")
        return self

    def record(self, method: str, path: str, status: int) -> None:
        key = "denied" if status == 403 else "failed" if status == 502 else "forwarded"
        with self._lock:
            self.counts[key] += 1
            if self.log_path is not None:
                with open(self.log_path, "a", encoding="utf-8") as fh:
                    fh.write(f"{time.time():.3f} {method} {path} {status}\n")

    def _log_line(self, line: str) -> None:
        if self.log_path is not None:
            with self._lock, open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(f"{time.time():.3f} {line}\n")

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        remove_stale(self.socket_path)


def agent_proxies(task: TaskSpec, records_file: Path, socket_dir: Path,
                  log_dir: Path | None = None) -> dict[str, EnvServiceProxy]:
    """Start a proxy for the declared service a level-3 task's environment talks to, when its
    kind says which paths belong to the agent's split (`EnvKind.agent_path_filter()(records)`, the
    records of `records_file`, the run's data/train.jsonl); the service is
    `grader.env.options.service`, or the task's only service. {} when none applies."""
    from a2c.runtime.data import read_jsonl
    from a2c.runtime.envs.registry import find_kind

    env = task.grader.env
    services = task.environment.services
    kind = find_kind(env.kind) if env is not None else None
    if env is None or kind is None or not services:
        return {}
    make_filter = kind.agent_path_filter()
    if make_filter is None:
        return {}
    wanted = (env.options or {}).get("service")
    chosen = [s for s in services if s.name == wanted] if wanted else \
        (services if len(services) == 1 else [])
    records = read_jsonl(records_file) if chosen else []
    proxies = {}
    for svc in chosen:
        proxy = EnvServiceProxy(socket_dir / f"{svc.name}.sock",
                                f"http://127.0.0.1:{int(svc.port)}", make_filter(records),
                                log_path=(log_dir / f"gateway-{svc.name}.log") if log_dir else None)
        proxies[svc.name] = proxy.start()
    return proxies
