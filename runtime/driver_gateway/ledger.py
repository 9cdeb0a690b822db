"""The gateway's books: running totals, budget admission, and the record of every call.

Totals live in memory and are updated under one lock the moment a call ends, so the budget check
of the next call sees them at once. Admission reserves each generation call's worst case under
the same lock (`admit`: input estimate + output cap, lowered to what the budgets leave after the
totals and every reservation in flight); `record` replaces the reservation by the metered usage. The slow part (blobs, the fsync'ed event, totals.json) goes
through one writer thread in call order, after the agent already has its answer: recording adds
nothing to the latency the scaffold sees. `close()` drains the writer (the gateway's SIGTERM
path), and totals.json is always written after its call's event and blobs, so a reader that sees
`calls: n` finds the n-th call's event and bodies on disk.

A gateway restarted on the same run (a resume) continues from totals.json: the sequence numbers,
the budget and the one `driver_budget_exhausted` event carry over.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from pathlib import Path
from typing import Any

from a2c.contracts.events import DriverBudgetExhausted, DriverCall, EventLog
from a2c.contracts.run_paths import RunPaths
from a2c.fsutil import write_bytes_atomic, write_json_atomic
from a2c.timefmt import iso_utc
from a2c.wires import Usage

from .admission import Reservation
from .gateway_config import GatewayConfig
from .prices import cost_usd

COUNTERS = ("calls", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
            "tokens", "cost_usd", "errors", "refused", "unpriced_calls", "usage_missing_calls")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def empty_totals(config: GatewayConfig | None) -> dict[str, Any]:
    out: dict[str, Any] = {k: 0 for k in COUNTERS}
    out.update(cost_usd=0.0, by_model={}, budget=config.budget.to_dict() if config else {},
               exhausted=None, driver=config.driver if config else None,
               model=config.model if config else None, seq=0, updated=None)
    return out


def _log_line(ev) -> str:
    if isinstance(ev, DriverBudgetExhausted):
        return f"budget exhausted: {ev.limit} {ev.used:g} of {ev.budget:g}"
    return (f"#{ev.seq} {ev.status} {ev.wire or '-'} {ev.path} model={ev.model} "
            f"in={ev.input_tokens} out={ev.output_tokens} cache_read={ev.cache_read_tokens} "
            f"cache_write={ev.cache_write_tokens} cost=${ev.cost_usd:.6f} "
            f"{ev.duration_ms:.1f}ms" + (f" error={ev.error}" if ev.error else "")
            + (f" cap_lowered={ev.cap_lowered['requested']}->{ev.cap_lowered['forwarded']}"
               f" (context {ev.cap_lowered['context']})" if ev.cap_lowered else ""))


class Ledger:
    def __init__(self, run_dir: Path, config: GatewayConfig, events: EventLog | None = None):
        self.paths = RunPaths(run_dir)
        self.config = config
        self.price = config.price
        self.budget = config.budget
        self.totals = empty_totals(config)
        try:
            saved = json.loads(self.paths.driver_totals.read_text(encoding="utf-8"))
            if saved.get("driver") == config.driver:
                self.totals.update({k: saved[k] for k in self.totals if k in saved})
                self.totals["budget"] = self.budget.to_dict()
        except (FileNotFoundError, ValueError):
            pass
        self.paths.driver_blobs.mkdir(parents=True, exist_ok=True)
        self.events = events or EventLog(self.paths.events)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._inflight = 0
        self._reserved_tokens = 0
        self._reserved_cost = 0.0
        self._stopping = False
        self._queue: queue.Queue = queue.Queue()
        self._writer = threading.Thread(target=self._write_loop, name="ledger-writer",
                                        daemon=True)
        self._writer.start()

    # ------------------------------------------------------------------ budget
    def admit(self, input_tokens: int, output_cap: int, candidates: int = 1,
              wait_s: float = 0.0) -> Reservation | tuple[str, float, float] | None:
        """Reserve a generation call's worst case, or say which limit is spent: (limit,
        budget, used), the limit names being the event's (tokens | cost_usd | calls); None
        once the gateway is stopping (`stop`).

        The reservation's output cap is lowered to what the token and cost budgets have left
        after the metered totals and every reservation in flight, so calls admitted together
        cannot pass a budget by more than the error of the input estimate. When only calls in
        flight stand in the way, admission waits (up to `wait_s`) for them to settle."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while True:
                if self._stopping:
                    return None
                found = self._grant(input_tokens, output_cap, candidates)
                if isinstance(found, Reservation):
                    self._inflight += 1
                    self._reserved_tokens += found.tokens
                    self._reserved_cost += found.cost_usd
                    return found
                limit, settled_room = found
                left = deadline - time.monotonic()
                if not settled_room or self._inflight == 0 or left <= 0:
                    return limit, self.budget.of(limit), self.totals[limit]
                self._cond.wait(left)

    def could_fit(self, input_tokens: int, candidates: int = 1) -> bool:
        """Whether a call with this input could be admitted once the calls in flight settle
        (admission asks before it asks the provider to count a call's input)."""
        with self._lock:
            found = self._grant(input_tokens, 1, candidates)
        return isinstance(found, Reservation) or found[1]

    def _grant(self, input_tokens: int, output_cap: int, candidates: int):
        """Under the lock: a Reservation, or (the limit in the way, whether it would leave
        room once the calls in flight settle)."""
        t, b = self.totals, self.budget
        if b.driver_calls is not None and t["calls"] + self._inflight >= b.driver_calls:
            return "calls", False
        wanted = out = output_cap * candidates
        if b.driver_tokens is not None:
            settled = b.driver_tokens - t["tokens"] - input_tokens
            out = min(out, settled - self._reserved_tokens)
            if out < candidates:
                return "tokens", settled >= candidates
        in_price, out_price = self._unit_prices()
        if b.driver_cost_usd is not None and out_price:
            settled = b.driver_cost_usd - t["cost_usd"] - input_tokens * in_price
            # (+1e-6: a whole token's worth of dollars must not round down to one less)
            out = min(out, int((settled - self._reserved_cost) / out_price + 1e-6))
            if out < candidates:
                return "cost_usd", settled >= candidates * out_price
        cap = out // candidates if out < wanted else output_cap
        cost = input_tokens * in_price + cap * candidates * out_price
        return Reservation(input_tokens, cap, candidates, cost)

    def _unit_prices(self) -> tuple[float, float]:
        """USD per token: the dearest input rate (a cache write may cost more than input) and
        the output rate; (0, 0) for an unpriced model."""
        if self.price is None:
            return 0.0, 0.0
        return (max(self.price.input_rates(), default=0.0) / 1e6,
                float(self.price.output) / 1e6)

    def stop(self) -> None:
        """The gateway is stopping: admission refuses from now on (a call waiting in it
        returns at once)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def release(self, res: Reservation | None) -> None:
        """Drop a call's reservation (once; `record` does it with the metered usage)."""
        with self._cond:
            self._release(res)

    def _release(self, res: Reservation | None) -> None:
        if res is None or res.released:
            return
        res.released = True
        self._inflight -= 1
        self._reserved_tokens -= res.tokens
        self._reserved_cost -= res.cost_usd
        self._cond.notify_all()

    def exhausted(self, limit: str, cap: float, used: float) -> None:
        """The first refusal for a spent budget: one `driver_budget_exhausted` event."""
        with self._lock:
            if self.totals["exhausted"] is not None:
                return
            seq = self.totals["seq"]
            self.totals["exhausted"] = {"limit": limit, "budget": cap, "used": used,
                                        "seq": seq, "at": iso_utc(time.time())}
            snapshot = json.loads(json.dumps(self.totals))
        self._queue.put(("exhausted", DriverBudgetExhausted(limit=limit, budget=cap,
                                                            used=used, seq=seq), snapshot))

    # ------------------------------------------------------------------ recording
    def record(self, *, wire: str | None, path: str, model: str | None, stream: bool,
               status: int, usage: Usage | None, latency_ms: float | None, duration_ms: float,
               request: bytes, response: bytes, error: str | None, generation: bool,
               forwarded: bool, reservation: Reservation | None = None,
               charged: bool = False) -> dict[str, Any]:
        """Count one call (in memory, now), replace its reservation by it, and queue its event,
        blobs and totals. `charged`: the usage is the reservation, the provider reported none."""
        u = usage or Usage()
        cost = cost_usd(self.price, u.input_tokens, u.output_tokens, u.cache_read_tokens,
                        u.cache_write_tokens) if forwarded else 0.0
        req_sha, resp_sha = sha256(request), sha256(response)
        with self._lock:
            t = self.totals
            seq = t["seq"]
            t["seq"] = seq + 1
            self._release(reservation)
            missing = generation and forwarded and (charged or not u.seen and status < 400)
            if generation and forwarded:
                t["calls"] += 1
                if missing:
                    t["usage_missing_calls"] += 1
                if self.price is None and u.seen:
                    t["unpriced_calls"] += 1
            if status >= 400 or error not in (None, "client_gone"):
                t["errors"] += 1            # refused or failed (a broken stream included)
            if not forwarded and status >= 400:
                t["refused"] += 1
            for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                      "cache_write_tokens"):
                t[k] += getattr(u, k)
            t["tokens"] += u.total
            t["cost_usd"] = round(t["cost_usd"] + cost, 10)
            if generation and forwarded:
                name = u.model or model or "unknown"
                m = t["by_model"].setdefault(name, {"calls": 0, "input_tokens": 0,
                                                    "output_tokens": 0, "cache_read_tokens": 0,
                                                    "cache_write_tokens": 0, "cost_usd": 0.0})
                m["calls"] += 1
                for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                          "cache_write_tokens"):
                    m[k] += getattr(u, k)
                m["cost_usd"] = round(m["cost_usd"] + cost, 10)
            t["updated"] = iso_utc(time.time())
            snapshot = json.loads(json.dumps(t))
        event = DriverCall(seq=seq, driver=self.config.driver, wire=wire, path=path,
                           model=model, response_model=u.model, stream=stream, status=status,
                           input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                           cache_read_tokens=u.cache_read_tokens,
                           cache_write_tokens=u.cache_write_tokens, cost_usd=cost,
                           latency_ms=None if latency_ms is None else round(latency_ms, 3),
                           duration_ms=round(duration_ms, 3), request_sha256=req_sha,
                           response_sha256=resp_sha, error=error,
                           usage_missing=True if missing else None,
                           cap_lowered=getattr(reservation, "lowered", None))
        self._queue.put(("call", event, snapshot, ((req_sha, request), (resp_sha, response))))
        return snapshot

    def _write_blob(self, digest: str, data: bytes) -> None:
        path = self.paths.driver_blobs / digest
        if not path.exists():
            write_bytes_atomic(path, data, mode=0o600)

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if item[0] == "call":
                    for digest, data in item[3]:
                        self._write_blob(digest, data)
                self.events.emit(item[1])
                write_json_atomic(self.paths.driver_totals, item[2], mode=0o600)
                print(_log_line(item[1]), flush=True)      # -> logs/driver-gateway.log
            except Exception as exc:          # the record must not take the gateway down
                print(f"driver gateway: recording failed: {exc!r}", flush=True)
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        self._queue.join()

    def write_totals(self) -> None:
        with self._lock:
            snapshot = json.loads(json.dumps(self.totals))
        write_json_atomic(self.paths.driver_totals, snapshot, mode=0o600)

    def close(self) -> None:
        self._queue.put(None)
        self._writer.join(timeout=30)
