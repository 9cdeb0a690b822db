"""The upstream side of the gateway: a pool of keep-alive connections to the provider, and the
headers a forwarded request carries.

The upstream is reached with http.client (HTTPS for https:// URLs), over a small pool of
keep-alive connections so a call to a remote provider does not pay a TLS handshake each time.
The headers sent are built, not copied: the agent's allowed ones (routes.forward_headers), the
provider's key in the wire's own header (`Wire.auth`), Host, and an identity encoding (the meter reads the
bytes as they pass).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse

from a2c.wires import WIRES

from .routes import forward_headers


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

    def headers(self, agent_headers, wire: str, auth_style: str | None, key: str | None,
                length: int) -> dict[str, str]:
        out = forward_headers(agent_headers)
        out.setdefault("content-type", "application/json")
        out["Host"] = self.host if self.port in (80, 443) else f"{self.host}:{self.port}"
        out["Accept-Encoding"] = "identity"
        out["Content-Length"] = str(length)
        if key:
            style = auth_style or (WIRES[wire].auth if wire in WIRES else "bearer")
            if style != "bearer":           # a header of its own (Wire.auth)
                out[style] = key
            else:
                out["Authorization"] = f"Bearer {key}"
        return out

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

    def send(self, method: str, path: str, body: bytes | None, headers: dict,
             attach=None):
        """(response, connection): one retry on a kept-alive connection the server closed.
        `attach(conn)` is called with each connection before the request goes over it (the
        gateway's stop shuts it to cut the call; attach raises once the call is cut)."""
        target = self.path_for(path)
        for attempt in (0, 1):
            conn, reused = self.connect()
            try:
                if attach is not None:
                    attach(conn)
                conn.request(method, target, body=body, headers=headers)
                return conn.getresponse(), conn
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError):
                conn.close()
                if not reused or attempt:     # a fresh connection failed: give up
                    raise
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def ask(self, path: str, body: bytes, headers: dict):
        """One small call of the gateway's own (a token count): the JSON of a 200 answer, or
        None for anything else."""
        try:
            resp, conn = self.send("POST", path, body, headers)
            try:
                data = resp.read()
            finally:
                conn.close()
            return json.loads(data) if resp.status == 200 else None
        except (OSError, http.client.HTTPException, ValueError):
            return None
