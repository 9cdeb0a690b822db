"""Bounded connections for a service's listeners (the threads of `a2c.unixhttp`'s servers): at
most `limit` open per listener, each idle at most `timeout_s` (the handler's socket timeout), and
a one-line log of what was dropped.

    class Server(BoundedMixin, unixhttp.UnixServer): ...
    class MyHandler(BoundedHandler, unixhttp.Handler): ...   # marks each request's run busy
    server.limiter = ConnectionLimiter(64, DropLog("unix", log=my_log))

A new connection over the limit takes the place of the connection idle the longest (one waiting
for its next request, or sending one slowly); only when every open connection is running a
request is the new one closed at once. So thousands of idle connections cost a bounded number
of threads and file descriptors, and a fresh request (`/health`, a submit) is still answered.
Drops are counted and logged at most once a second, one line each time, never a traceback.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def _stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


class DropLog:
    """Counts dropped connections by reason; writes one line a second at most (`log`: the
    service's own log line, default stderr)."""

    def __init__(self, name: str, every_s: float = 1.0, log: Callable[[str], None] = _stderr):
        self.name, self.every_s, self.log = name, every_s, log
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.last = 0.0

    def note(self, reason: str) -> None:
        with self.lock:
            self.counts[reason] = self.counts.get(reason, 0) + 1
        self.flush(force=False)

    def flush(self, force: bool = True) -> None:
        with self.lock:
            now = time.monotonic()
            if not self.counts or (not force and now - self.last < self.every_s):
                return
            text = ", ".join(f"{n} {why}" for why, n in sorted(self.counts.items()))
            self.counts, self.last = {}, now
        self.log(f"{self.name}: dropped connections: {text}")


class ConnectionLimiter:
    """The open connections of one listener: idle since when (None while running a request)."""

    def __init__(self, limit: int, drops: DropLog):
        self.limit = max(1, int(limit))
        self.drops = drops
        self.lock = threading.Lock()
        self.open: dict[Any, float | None] = {}

    def admit(self, sock: socket.socket) -> bool:
        with self.lock:
            if len(self.open) >= self.limit:
                idle = [(t, id(s), s) for s, t in self.open.items() if t is not None]
                if not idle:
                    self.drops.note(f"refused (all {self.limit} connections busy)")
                    return False
                _, _, victim = min(idle)
                self.open.pop(victim)
                try:
                    victim.shutdown(socket.SHUT_RDWR)   # its thread wakes up and ends
                except OSError:
                    pass
                self.drops.note(f"idle closed (over {self.limit} open)")
            self.open[sock] = time.monotonic()
            return True

    def busy(self, sock: Any, running: bool) -> None:
        with self.lock:
            if sock in self.open:
                self.open[sock] = None if running else time.monotonic()

    def release(self, sock: Any) -> None:
        """Forget `sock` before it is closed (under the lock: never shut down a reused fd)."""
        with self.lock:
            self.open.pop(sock, None)

    def __len__(self) -> int:
        with self.lock:
            return len(self.open)


class BoundedMixin:
    """For a socketserver ThreadingMixIn server: `limiter` set per server."""

    limiter: ConnectionLimiter

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.limiter.admit(request):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)  # type: ignore[misc]

    def shutdown_request(self, request: Any) -> None:
        self.limiter.release(request)
        super().shutdown_request(request)  # type: ignore[misc]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke or timed out is one count; a failure inside the handler
        keeps its traceback (the server class's own handling)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            self.limiter.drops.note(f"ended by {type(exc).__name__}")
        else:
            super().handle_error(request, client_address)  # type: ignore[misc]


class BoundedHandler:
    """For an http.server handler on a `BoundedMixin` server: a request's connection is busy
    from its parsed request line to its answer, so it is never the one closed to make room;
    http.server's own errors (a request line that timed out, a malformed one) are counted in
    the drop log, never printed."""

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # type: ignore[misc]
        if parsed:
            self.server.limiter.busy(self.request, True)  # type: ignore[attr-defined]
        return parsed

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()  # type: ignore[misc]
        finally:
            self.server.limiter.busy(self.request, False)  # type: ignore[attr-defined]

    def log_error(self, format: str, *args: Any) -> None:
        text = format % args if args else format
        timeout = getattr(self, "timeout", None)
        self.server.limiter.drops.note(  # type: ignore[attr-defined]
            ("timed out" + (f" (idle {timeout:g} s)" if timeout else ""))
            if "timed out" in text else "bad request line")
