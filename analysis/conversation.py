"""Replaying the driver gateway's call record into the trajectory's steps.

Each `driver_call` event (in order) names its request and response bodies in RUN/driver/blobs.
Each request repeats the conversation so far; per conversation thread (a scaffold's side calls
— a title, a quota probe — start threads of their own) only the items not seen before count:
new tool results become the observations of the earlier step whose tool calls they answer, a
new user message a user step, and each call's answer one agent step with the call's tokens and
cost. A shell command written as a ```bash block in the message (mini-swe-agent) counts as a
tool call, and the next user message as its output.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json, sha256_bytes
from a2c.contracts.events import DriverCall
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.trajectory import Metrics, MetricsExtra, ResultExtra, StepExtra
from a2c.timefmt import iso_utc, parse_time
from a2c.wires import Item, Turn, generation_call, wire_for_path
from a2c.wires import ToolCall as WireCall
from a2c.wires.reading import request_items, response_turn

from .step_drafts import DraftCall, DraftResult, DraftStep
from .tool_calls import call_extra, text_actions

MAX_BLOB = 64 << 20


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def as_float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


def metrics_of(call: DriverCall) -> Metrics:
    """ATIF metrics of one driver call. The gateway counts input tokens apart from cache reads
    and writes (runtime/driver_gateway: `input_tokens` are the uncached ones); ATIF's
    `prompt_tokens` is the whole prompt, cached part included, so it is their sum, and
    `cached_tokens` the cache reads. The gateway's own fields are kept in `extra`."""
    fresh, read, write = (as_int(n) for n in (call.input_tokens, call.cache_read_tokens,
                                              call.cache_write_tokens))
    return Metrics(prompt_tokens=fresh + read + write,
                   completion_tokens=as_int(call.output_tokens), cached_tokens=read,
                   cost_usd=as_float(call.cost_usd),
                   extra=MetricsExtra(input_tokens=fresh, cache_write_tokens=write))


def wire_of(call: DriverCall) -> str | None:
    """The wire a recorded call spoke: as recorded, else as the gateway routes its path."""
    wire = wire_for_path(call.path)
    return call.wire or (wire.name if wire else None)


def _fp(item: Item) -> str:
    """What makes a conversation item the same item when a later request repeats it."""
    kind = item.kind
    if kind == "assistant":
        # By the calls' names and arguments, not their ids: some scaffolds give the model's
        # id-less calls ids of their own when they repeat them (Gemini CLI).
        if item.tool_calls:
            return "assistant:" + "|".join(_signature(c) for c in item.tool_calls)
        return "assistant:" + sha256_bytes((item.text or "").strip().encode())
    if kind == "tool_result":
        key = item.call_id or f"{item.name}:{item.content}"
        return f"tool_result:{key}"
    return f"{kind}:" + sha256_bytes((item.text or "").strip().encode())


def _signature(call: WireCall) -> str:
    return f"{call.name}:{canonical_json(call.arguments or {}).decode()}"


class Thread:
    """One conversation the scaffold holds with the model: the items seen so far, and the
    calls still waiting for a result."""

    def __init__(self, number: int, key: str, first: str):
        self.number = number
        self.key = key
        self.first = first
        self.seen: Counter[str] = Counter()
        self.calls = 0
        self.last_agent: DraftStep | None = None
        self.pending_by_name: dict[str, list[DraftCall]] = {}
        self.synth_by_sig: dict[str, list[DraftCall]] = {}


def _thread_key(items: list[Item]) -> tuple[str, str]:
    system = next((i for i in items if i.kind == "system"), None)
    first = next((i for i in items if i.kind == "user"), None)
    key = "|".join(_fp(i) for i in (system, first) if i is not None)
    return key, (first.text if first else "")[:120]


class Replay:
    """The steps the driver record makes, one `driver_call` at a time (`call`)."""

    def __init__(self, run_dir: Path):
        self.paths = RunPaths(run_dir)
        self.steps: list[DraftStep] = []
        self.threads: dict[str, Thread] = {}
        self.calls: dict[str, DraftStep] = {}   # tool_call_id -> the step holding it
        self.warnings: list[str] = []
        self.synth = 0

    # -------------------------------------------------------------- steps
    def add_step(self, source: str, message: str, ts: str | None,
                 extra: StepExtra) -> DraftStep:
        step = DraftStep(len(self.steps) + 1, source, message or "", ts, extra)
        self.steps.append(step)
        return step

    def observe(self, thread: Thread, item: Item, ts: str | None) -> None:
        """A tool result: an observation of the step whose call it answers."""
        call_id = item.call_id
        owner = self.calls.get(call_id) if call_id else None
        if owner is None and item.name:      # Gemini: calls without ids, by name
            queue = thread.pending_by_name.get(item.name) or []
            if queue:
                call = queue.pop(0)
                call_id, owner = call.tool_call_id, self.calls.get(call.tool_call_id)
        elif owner is not None:
            for queue in thread.pending_by_name.values():
                queue[:] = [c for c in queue if c.tool_call_id != call_id]
        if owner is None:
            owner = thread.last_agent
        result = DraftResult(call_id, item.content or "",
                             ResultExtra(is_error=True) if item.is_error else None)
        if owner is not None and call_id and owner.answers(call_id):
            return          # the same result, repeated by a request of another thread
        if owner is None:
            owner = self.add_step("user", "", ts, StepExtra(thread=thread.number))
        owner.results.append(result)

    def agent_turn(self, thread: Thread, turn: Turn, ts: str | None,
                   call: DriverCall) -> DraftStep:
        step = self.add_step("agent", turn.text or "", ts, StepExtra(
            call_seq=call.seq, thread=thread.number, wire=call.wire, status=call.status,
            error=call.error, latency_ms=call.latency_ms, duration_ms=call.duration_ms,
            stop_reason=turn.stop))
        step.model_name = call.response_model or turn.model or call.model
        step.reasoning = turn.reasoning or None
        for c in turn.tool_calls or text_actions(turn.text or ""):
            if not c.id:
                self.synth += 1
                c = dataclasses.replace(c, id=f"a2c-call-{self.synth}")
            args = c.arguments if isinstance(c.arguments, dict) else {}
            entry = DraftCall(c.id, c.name or "", args, call_extra(c, args, answered=True))
            step.tool_calls.append(entry)
            self.calls[c.id] = step
            if c.synth or c.from_message:
                thread.pending_by_name.setdefault(c.name or "", []).append(entry)
                thread.synth_by_sig.setdefault(_signature(c), []).append(entry)
        step.metrics = metrics_of(call)
        thread.last_agent = step
        return step

    def request_turn(self, thread: Thread, item: Item, ts: str | None) -> None:
        """An agent turn this record did not see answered (a pre-seeded history, or an echo
        that differs from the response): kept, marked."""
        if any(c.id in self.calls for c in item.tool_calls):
            return
        step = self.add_step("agent", item.text or "", ts,
                             StepExtra(thread=thread.number, from_request=True))
        step.reasoning = item.reasoning or None
        for c in item.tool_calls:
            args = c.arguments or {}
            step.tool_calls.append(DraftCall(c.id or "", c.name or "", args,
                                             call_extra(c, args, answered=False)))
            if c.id:
                self.calls[c.id] = step
        thread.last_agent = step

    # -------------------------------------------------------------- one call
    def _blob(self, digest: Any, seq: int) -> bytes | None:
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            return None
        path = self.paths.driver_blobs / digest
        try:
            if path.stat().st_size > MAX_BLOB:
                self.warnings.append(f"driver call {seq}: body {digest[:12]} is over "
                                     f"{MAX_BLOB} bytes")
                return None
            return path.read_bytes()
        except OSError:
            self.warnings.append(f"driver call {seq}: body {digest[:12]} is missing from "
                                 f"driver/blobs")
            return None

    def _request(self, raw: bytes | None, call: DriverCall, wire: str | None) -> list[Item]:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
            self.warnings.append(f"driver call {call.seq}: the request body is not JSON")
        return request_items(wire, body)

    def _thread_of(self, items: list[Item]) -> Thread:
        key, first = _thread_key(items)
        thread = self.threads.get(key) or self._closest_thread(items)
        if thread is None:
            thread = self.threads[key] = Thread(len(self.threads), key, first)
        thread.calls += 1
        return thread

    def call(self, call: DriverCall, ts: str | None) -> None:
        """One driver call (its event's payload, and the time the event was written)."""
        wire = wire_of(call)
        if not generation_call(wire, call.path):
            return
        raw_request = self._blob(call.request_sha256, call.seq)
        raw_response = self._blob(call.response_sha256, call.seq)
        items = self._request(raw_request, call, wire)
        thread = self._thread_of(items)
        end = parse_time(ts)
        start = iso_utc(end - float(call.duration_ms) / 1000) if end is not None and \
            isinstance(call.duration_ms, (int, float)) else ts
        self._replay(thread, items, start)
        turn = response_turn(wire, raw_response)
        if raw_response is not None and not (turn.text or turn.tool_calls) and \
                as_int(call.status) < 400 and not call.error:
            self.warnings.append(f"driver call {call.seq}: no message or tool call read from "
                                 f"the response ({'stream' if call.stream else 'JSON'})")
        self.agent_turn(thread, turn, ts, call)
        if turn.text or turn.tool_calls:
            thread.seen[_fp(Item.assistant(turn))] += 1

    def _replay(self, thread: Thread, items: list[Item], start: str | None) -> None:
        """The request's items this thread has not seen: results, turns, messages."""
        seen_now: Counter[str] = Counter()
        for item in items:
            fp = _fp(item)
            seen_now[fp] += 1
            if seen_now[fp] <= thread.seen[fp]:
                if item.kind == "assistant":
                    self._adopt_ids(thread, item)
                continue
            thread.seen[fp] += 1
            if item.kind == "tool_result":
                self.observe(thread, item, start)
            elif item.kind == "assistant":
                self.request_turn(thread, item, start)
            else:
                pending = self._pending_text_call(thread)
                if item.kind == "user" and pending is not None and thread.last_agent:
                    thread.last_agent.results.append(
                        DraftResult(pending.tool_call_id, item.text))
                else:
                    self.add_step(item.kind, item.text or "", start,
                                  StepExtra(thread=thread.number))

    def _closest_thread(self, items: list[Item]) -> Thread | None:
        """The thread a request continues whose opening changed (a scaffold rewriting its
        environment message): the one that has seen most of its items, if that is most of
        them."""
        if len(items) < 3:
            return None
        best, best_seen = None, 0
        for thread in self.threads.values():
            seen = sum(1 for item in items if thread.seen[_fp(item)] > 0)
            if seen > best_seen:
                best, best_seen = thread, seen
        return best if best_seen * 2 > len(items) else None

    def _adopt_ids(self, thread: Thread, item: Item) -> None:
        """A repeated turn whose calls now carry ids the answer did not (the scaffold named
        them): the steps' calls take those ids, so the results that quote them find them."""
        for call in item.tool_calls:
            real = call.id
            if not real or call.synth or real in self.calls:
                continue
            queue = thread.synth_by_sig.get(_signature(call)) or []
            if not queue:
                continue
            entry = queue.pop(0)
            step = self.calls.pop(entry.tool_call_id, None)
            entry.tool_call_id = real
            if step is not None:
                self.calls[real] = step

    def _pending_text_call(self, thread: Thread) -> DraftCall | None:
        last = thread.last_agent
        if last is None or last is not (self.steps[-1] if self.steps else None):
            return None
        for call in last.tool_calls:
            if call.extra.parsed_from == "message" and not last.answers(call.tool_call_id):
                return call
        return None
