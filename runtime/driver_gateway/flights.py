"""The calls in flight, so that a gateway told to stop records every one of them (issue 32).

At the run's end the runtime stops the agent, then the gateway (SIGTERM). A call still running
then (an uncapped generation the agent was waiting for, a stream whose reader is gone) used to
end with the process and leave no event: its tokens were billed by the provider and counted
nowhere. Now each forwarded call is a `Flight` from before its connection upstream opens until
its event is recorded, and the stop (`Flights.stop`) cuts them all: their upstream connections
are shut (the provider stops generating; each handler sees its read fail and records the call
as `cut`, with what it streamed and the usage it saw, charged at least its reservation), then
the agents' connections of any still running; a call whose handler has still not recorded it
after that is recorded by the stop itself from what its flight holds. Only then does the
gateway close its record.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2c.wires import Usage

from .admission import Reservation


class CutError(OSError):
    """The gateway is stopping: the call is not (or no longer) forwarded."""


def _shut(sock: Any) -> None:
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@dataclass(frozen=True)
class Forwarded:
    """What a forwarded call's record needs, fixed when it goes upstream: its route (wire,
    path), the model it names, whether it streams, when it arrived (`t0`, perf_counter), the
    bytes forwarded, whether it is a generation, and its reservation (None: not admitted by the
    ledger, e.g. a token count)."""

    wire: str = ""
    path: str = ""
    model: str = ""
    stream: bool = False
    t0: float = 0.0
    request: bytes = b""
    generation: bool = False
    res: Reservation | None = None


class Flight:
    """One forwarded call: its upstream connection once open, the agent's socket, what was
    relayed so far (`sent`, `meter`), and who records it (`claim`: exactly once)."""

    def __init__(self, client: Any, info: Forwarded):
        self.client = client
        self.info = info
        self.upstream: Any = None
        self.cut = False
        self.client_cut = False             # the stop shut the agent's connection itself
        self.status: int | None = None      # the upstream's status, once it answered
        self.latency_ms: float | None = None
        self.sent: list[bytes] = []
        self.meter: Any = None
        self._claimed = False
        self._lock = threading.Lock()

    def attach(self, conn: Any) -> None:
        """The upstream connection the call goes over (CutError once cut)."""
        with self._lock:
            if self.cut:
                raise CutError("the driver gateway is stopping")
            self.upstream = conn

    def claim(self) -> bool:
        """True for the one caller that records this call."""
        with self._lock:
            if self._claimed:
                return False
            self._claimed = True
            return True

    def cut_upstream(self) -> None:
        with self._lock:
            self.cut = True
            conn = self.upstream
        _shut(getattr(conn, "sock", None))

    def cut_client(self) -> None:
        self.client_cut = True
        _shut(self.client)

    def client_left(self) -> bool:
        """Whether the agent closed its connection (a killed agent's call, waiting on the
        provider, has not noticed yet)."""
        try:
            readable, _, _ = select.select([self.client], [], [], 0)
            return bool(readable) and self.client.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


class Flights:
    """The calls in flight; `stop` ends them all and returns once each is recorded."""

    def __init__(self) -> None:
        self._open: set[Flight] = set()
        self._cond = threading.Condition()
        self.stopping = False

    def start(self, flight: Flight) -> None:
        """Register a call about to go upstream (CutError once the gateway is stopping)."""
        with self._cond:
            if self.stopping:
                raise CutError("the driver gateway is stopping")
            self._open.add(flight)

    def end(self, flight: Flight) -> None:
        with self._cond:
            self._open.discard(flight)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._open)

    def _wait(self, seconds: float) -> list[Flight]:
        deadline = time.monotonic() + seconds
        with self._cond:
            while self._open and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            return list(self._open)

    def stop(self, record: Callable[[Flight], None], upstream_grace: float = 3.0,
             client_grace: float = 2.0) -> int:
        """Cut every call in flight (no new one starts): shut its upstream connection and let
        its handler record it; after `upstream_grace` s shut the agents' connections of those
        still running; after `client_grace` s more `record` the rest here. The number cut."""
        with self._cond:
            self.stopping = True
            cut = list(self._open)
        for flight in cut:
            flight.cut_upstream()
        left = self._wait(upstream_grace)
        for flight in left:
            flight.cut_client()
        for flight in self._wait(client_grace):
            if flight.claim():
                record(flight)
            self.end(flight)
        return len(cut)


# ------------------------------------------------------------------------------- the record
def record(ledger: Any, flight: Flight, error: str | None) -> None:
    """The event of a call that went upstream, from what its flight saw. A call whose usage did
    not arrive whole (no usage in the answer, a stream cut short, a call cut, an agent gone
    before the usage) is charged at least its reservation (Reservation.charge). `error` is the
    handler's (`client_gone_*`: the agent left first; recorded as `client_gone`)."""
    info = flight.info
    res = info.res
    meter = flight.meter
    try:
        usage = meter.finish() if meter is not None else Usage()
    except Exception:        # the stop recording a call its handler still holds
        usage = meter.usage if meter is not None else Usage()
    status = flight.status
    charged = False
    if res is not None and (status is None or status < 400) and (
            not usage.seen or error not in (None, "client_gone")):
        # No usage, a stream cut short, a call cut: the provider may have billed up to the cap.
        usage, charged = res.charge(usage), True
    if error and error.startswith("client_gone"):
        error = "client_gone"
    if status is None:
        status = 503             # cut before any answer: what the agent was (or would be) told
    elif error is None and status >= 400:
        error = "upstream_status"
    ledger.record(wire=info.wire, path=info.path, model=info.model,
                  stream=info.stream, status=status, usage=usage,
                  latency_ms=flight.latency_ms,
                  duration_ms=(time.perf_counter() - info.t0) * 1000,
                  request=info.request, response=b"".join(list(flight.sent)),
                  error=error, generation=info.generation, forwarded=True,
                  reservation=res, charged=charged)


def record_failed(ledger: Any, flight: Flight, status: int, kind: str, answer: bytes,
                  forwarded: bool) -> None:
    """The event of a call the upstream did not answer: unreachable (nothing generated, nothing
    charged), silent past the timeout or cut by the stop while the provider worked on it (it
    may have generated: charged its reservation), or not sent at all (the stop came first)."""
    info = flight.info
    res = info.res
    charged = forwarded and res is not None and kind in ("timeout", "cut")
    ledger.record(wire=info.wire, path=info.path, model=info.model,
                  stream=info.stream, status=status,
                  usage=res.charged() if charged else None, latency_ms=None,
                  duration_ms=(time.perf_counter() - info.t0) * 1000,
                  request=info.request, response=answer, error=kind,
                  generation=info.generation, forwarded=forwarded,
                  reservation=res, charged=charged)
