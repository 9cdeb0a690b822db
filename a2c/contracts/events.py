"""The run record's spine: an append-only, hash-chained, signed `events.jsonl`, and its event
types.

Each event carries the hash of the one before it, so editing, inserting, reordering or deleting any
line breaks the chain at that line and `verify_events` names it. Each event also carries `key`
(the id of the operator's public signing key) and `sig`, an Ed25519 signature of its hash
(a2c.contracts.record_key): the private key lives outside the run directory, so whoever edits a
record and recomputes the plain hashes still cannot produce the signatures, and anyone with the
public key can check them. Records written before the signatures carry `mac` (HMAC-SHA256 under a
legacy key) instead; they verify with that key given explicitly. Appends are fsync'ed because
the record must survive a crash of the runtime at any point; the file is 0600. Each event type's
`data` is one payload class below (`EVENT_TYPES`); `EventLog.emit(payload)` writes one,
`payload_of(event)` reads one.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from a2c.canonical import canonical_json, sha256_bytes
from a2c.timefmt import iso_utc

from .record_key import ED25519, LEGACY_HMAC, SigningKey, Verifier, operator_key, verifiers
from .records import Record, ScoredFields, optional, read_jsonl_tolerant

GENESIS = "0" * 64
EVENTS_FILE = "events.jsonl"
AUTH_FIELDS = ("hash", "sig", "mac")      # not covered by an event's hash
SCHEMES = {"sig": ED25519, "mac": LEGACY_HMAC}


def utc_now() -> str:
    return iso_utc(time.time())


def event_hash(event: dict[str, Any]) -> str:
    """sha256 of the event without its `hash`, `sig` and `mac` (the `key` id is covered)."""
    body = {k: v for k, v in event.items() if k not in AUTH_FIELDS}
    return sha256_bytes(canonical_json(body))


# ----------------------------------------------------------------------------- payloads
@dataclass
class EventPayload(Record):
    TYPE: ClassVar[str] = ""


@dataclass
class RunStarted(EventPayload):
    """The run's identity (a subset of run.json, written by the runtime at the first start)."""

    TYPE: ClassVar[str] = "run_started"
    run_id: str | None = None
    task: str | None = None
    level: int | None = optional()
    agent: str | None = None
    agent_digest: str | None = optional()
    driver: str | None = None
    mode: str | None = None
    seed: int | None = None
    backend: str | None = optional()
    isolation: str | None = optional()
    base_model: Any = optional()
    data: dict[str, Any] | None = optional()
    bundle_digest: str | None = None
    spec_hash: str | None = optional()
    budget: dict[str, Any] | None = None
    scoring: dict[str, Any] | None = optional()
    versions: dict[str, Any] | None = optional()
    driver_server: dict[str, Any] | None = optional()   # a vllm/ driver a2c served: digest, flags


@dataclass
class RunResumed(EventPayload):
    TYPE: ClassVar[str] = "run_resumed"
    resume: int | None = None
    pending: list[str] = field(default_factory=list)
    deadline: float | None = None
    agent_exit: dict[str, Any] | None = None


@dataclass
class BaselineScored(EventPayload):
    TYPE: ClassVar[str] = "baseline_scored"
    score: float | None = None
    ci95: list[float] | None = None
    valid: bool | None = optional()
    error: str | None = optional()
    cached: bool | None = optional()
    key: str | None = optional()
    elapsed_s: float | None = None
    backend: str | None = None
    weights_hash: str | None = optional()


@dataclass
class AgentStarted(EventPayload):
    TYPE: ClassVar[str] = "agent_started"
    deadline: float | None = None
    wall_clock_s: float | None = None
    isolation: str | None = None
    resumed: bool = False


@dataclass
class SubmissionReceived(EventPayload):
    TYPE: ClassVar[str] = "submission_received"
    id: int | str = 0
    model_path: str | None = None
    weights_hash: str | None = None
    note: str | None = optional()


@dataclass
class SubmissionPruned(EventPayload):
    """The grader removed its copy of a scored submission that can no longer count (neither the
    best nor the last valid one, nor the original of either); the journal keeps its hash
    (runtime/grader_service/pruning.py)."""

    TYPE: ClassVar[str] = "submission_pruned"
    id: int | str = 0
    weights_hash: str | None = None
    bytes: int | None = None


@dataclass
class SubmissionScored(ScoredFields, EventPayload):
    """A scored (or invalid) submission. `code` (a2c.contracts.submission_errors) says why it is
    invalid; `copy_of_base` whether its weights are the untouched base model's; `not_derived`
    whether the provenance check found it is not derived from the base (another model's weights,
    a re-initialised model; the details are in results/<n>.json `provenance`). Its fields are
    a2c.contracts.records.ScoredFields, shared with the journal's `scored` line."""

    TYPE: ClassVar[str] = "submission_scored"


@dataclass
class Snapshot(EventPayload):
    TYPE: ClassVar[str] = "snapshot"
    commit: str = ""
    reason: str | None = None            # submission | periodic | final
    submission_id: int | str | None = None
    files: int | None = None
    bytes: int | None = None
    changed: bool | None = optional()
    excluded: int | None = optional()


@dataclass
class BudgetWarning(EventPayload):
    TYPE: ClassVar[str] = "budget_warning"
    fraction: float | None = optional()
    used_s: float | None = optional()
    remaining_s: float | None = None


@dataclass
class DeadlineReached(EventPayload):
    TYPE: ClassVar[str] = "deadline_reached"
    deadline: float | None = None
    wall_clock_s: float | None = None
    note: str | None = optional()


@dataclass
class AgentExited(EventPayload):
    TYPE: ClassVar[str] = "agent_exited"
    returncode: int | None = None
    reason: str | None = None
    stop: dict[str, Any] | None = optional()
    cause: str | None = optional()       # why, where the code does not say (out of memory)


@dataclass
class RunFinished(EventPayload):
    TYPE: ClassVar[str] = "run_finished"
    baseline_score: float | None = None
    best_score: float | None = None
    final_score: float | None = None
    submissions: int | None = optional()
    valid_submissions: int | None = optional()
    status: str | None = optional()
    final_split_score: float | None = optional()        # the counted submission, final split
    final_split_baseline: float | None = optional()     # the base model, final split
    selection_gap: float | None = optional()            # feedback gain - final gain


@dataclass
class RecordSealed(EventPayload):
    """The digests of the record's files, written by the runtime as the last event of a run (at
    its end, after a failure, and again at the end of each resume): `files` maps each sealed
    path (run.json, submissions.jsonl, results/*, logs/*, agent/prompt.rendered.md) to
    {"sha256", "size"}, and "data/" to {"tree", "files"}; see a2c.contracts.seal. A log is append-only: an earlier seal holds for
    its first `size` bytes."""

    TYPE: ClassVar[str] = "record_sealed"
    reason: str | None = None
    files: dict[str, Any] = field(default_factory=dict)


@dataclass
class DriverCall(EventPayload):
    """One request the agent made to its driver model through the gateway (runtime/driver_gateway).
    Tokens are the provider's own usage fields (streamed ones included); `request_sha256` and
    `response_sha256` name the bodies in RUN/driver/blobs; `status` is the HTTP status the agent
    got; `error` says why the gateway answered itself (budget, auth, model, upstream down)."""

    TYPE: ClassVar[str] = "driver_call"
    seq: int = 0
    driver: str | None = None                # the run's driver, e.g. anthropic/claude-sonnet-4-5
    wire: str | None = None                  # anthropic | openai-chat | openai-responses | gemini
    path: str | None = None
    model: str | None = None                 # the model the request named
    response_model: str | None = optional()  # the model the provider says answered
    stream: bool = False
    status: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float | None = None          # first byte of the upstream's answer
    duration_ms: float | None = None         # the whole call
    request_sha256: str | None = None
    response_sha256: str | None = optional()
    error: str | None = optional()
    usage_missing: bool | None = optional()
    # the output cap forwarded was lowered below the request's own because the served model's
    # context cannot hold it: {requested, forwarded, context, input_estimate, why}
    cap_lowered: dict[str, Any] | None = optional()


@dataclass
class DriverBudgetExhausted(EventPayload):
    """A driver budget (tokens, cost_usd or calls) was spent: the gateway refuses further calls
    in the scaffold's own error format; the run goes on to its normal end."""

    TYPE: ClassVar[str] = "driver_budget_exhausted"
    limit: str = ""                          # tokens | cost_usd | calls
    budget: float | None = None
    used: float | None = None
    seq: int | None = optional()


@dataclass
class FinalScored(EventPayload):
    """One score on the task's final split (`scoring.final`): held-out items the agent never got
    feedback on, scored once after the agent has stopped, for the submission the scoring policy
    counts (`subject: submission`, `submission_id`) and for the base model (`subject: baseline`).
    `feedback_score` is the same model's score on the feedback items; `result` the file with its
    per-item outputs (results/final-<id>.json, results/final-baseline.json)."""

    TYPE: ClassVar[str] = "final_scored"
    subject: str = "submission"              # submission | baseline
    submission_id: int | str | None = None
    score: float | None = None
    ci95: list[float] | None = None
    n_items: int | None = None
    valid: bool = False
    error: str | None = None
    feedback_score: float | None = None
    weights_hash: str | None = optional()
    cached: bool | None = optional()
    elapsed_s: float | None = None
    backend: str | None = None
    result: str | None = None


@dataclass
class ProcessRecorded(EventPayload):
    """A session of the host-side process recorder ended (a2c.contracts.process_record): the
    digest of logs/processes.jsonl as it then was (`sha256` of its first `size` bytes), how many
    processes and kept code files it holds, and the `problems` that make it incomplete."""

    TYPE: ClassVar[str] = "process_record"
    file: str = "logs/processes.jsonl"
    sha256: str = ""
    size: int = 0
    session: int = 0
    processes: int = 0
    captured: int = 0
    samples: int = 0
    interval_s: float | None = None
    cpu_s: float | None = None
    problems: list[str] = field(default_factory=list)


EVENT_TYPES: dict[str, type[EventPayload]] = {cls.TYPE: cls for cls in (
    RunStarted, RunResumed, BaselineScored, AgentStarted, SubmissionReceived, SubmissionScored,
    SubmissionPruned, Snapshot, BudgetWarning, DeadlineReached, AgentExited, RunFinished, RecordSealed,
    DriverCall, DriverBudgetExhausted, FinalScored, ProcessRecorded)}


@dataclass
class Event(Record):
    """One line of events.jsonl (the envelope; `data` is the type's payload as a dict)."""

    seq: int = 0
    ts: str = ""
    type: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    prev: str = GENESIS
    key: str | None = optional()     # the signing key's id (a2c.contracts.record_key)
    hash: str = ""
    sig: str | None = optional()     # Ed25519(operator's private key, hash), hex
    mac: str | None = optional()     # legacy records: HMAC-SHA256(record key, hash)


def payload_of(event: dict[str, Any]) -> EventPayload | None:
    """The typed payload of an event dict (None for a type this a2c does not know)."""
    cls = EVENT_TYPES.get(event.get("type"))  # type: ignore[arg-type]
    data = event.get("data")
    return cls.from_dict(data if isinstance(data, dict) else {}) if cls else None


# ----------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class ChainCheck:
    """`ok`: the hash chain holds and no signature (or legacy mac) is wrong. `authenticated`:
    besides, every event's signature was checked with a key given; when it could not be,
    `auth_note` says why. `scheme`: "ed25519", or "hmac-sha256" for a legacy record."""

    ok: bool
    events: int
    bad_line: int | None = None  # 1-based line number of the first broken line
    reason: str | None = None
    authenticated: bool = False
    key_id: str | None = None
    auth_note: str | None = None
    scheme: str | None = None

    @property
    def legacy(self) -> bool:
        return self.scheme == LEGACY_HMAC


def _auth_field(event: dict[str, Any]) -> str | None | bool:
    """"sig", "mac", None (neither), or False (both: refused)."""
    has = [name for name in ("sig", "mac") if name in event]
    return False if len(has) > 1 else (has[0] if has else None)


def _missing_key_note(scheme: str, record_key: str, given: list[Verifier]) -> str:
    same = [k for k in given if k.scheme == scheme]
    if scheme == LEGACY_HMAC:
        if not same:
            return (f"a legacy HMAC record under key {record_key}; give its key file "
                    "(--key-file) to authenticate it")
        return (f"legacy HMAC key {record_key} not available (the key given is "
                f"{', '.join(k.id for k in same)})")
    if not same:
        return f"public key {record_key} not available"
    return (f"key id mismatch: signed by key {record_key}, not by the public key(s) given "
            f"({', '.join(k.id for k in same)}): re-signed with another key, or an older key of "
            "the operator not given (--public-key)")


def verify_events(path: str | Path, keys: Verifier | SigningKey | list | None = None
                  ) -> ChainCheck:
    """Check every line's hash and link, and with `keys` (public keys; legacy HMAC keys) every
    line's signature; report the first broken line (1-based). Without the record's key the chain
    may be intact but is not authenticated."""
    path = Path(path)
    given = verifiers(keys)
    if not path.exists():
        return ChainCheck(False, 0, None, f"{path} does not exist")
    prev = GENESIS
    count = 0
    record_key: str | None = None
    scheme_field: str | None = None
    checker: Verifier | None = None
    unsigned: int | None = None      # first line without a signature
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                event = json.loads(raw)
            except ValueError as exc:
                return ChainCheck(False, count, lineno, f"not valid JSON: {exc}")
            if not isinstance(event, dict):
                return ChainCheck(False, count, lineno, "not a JSON object")
            if event.get("seq") != count:
                return ChainCheck(False, count, lineno,
                                  f"sequence number {event.get('seq')!r}, expected {count}")
            if event.get("prev") != prev:
                return ChainCheck(False, count, lineno, "does not link to the previous event")
            if event.get("hash") != event_hash(event):
                return ChainCheck(False, count, lineno, "content does not match its hash")
            auth = _auth_field(event)
            if auth is False:
                return ChainCheck(False, count, lineno, "carries both a signature (sig) and a "
                                  "legacy mac")
            if auth is None or "key" not in event:
                unsigned = lineno if unsigned is None else unsigned
            elif record_key is None and unsigned is None:
                record_key, scheme_field = event["key"], auth
                checker = next((k for k in given if k.id == record_key
                                and k.field_name == auth), None)
            if "key" in event and record_key is not None and event["key"] != record_key:
                return ChainCheck(False, count, lineno, f"written with record key "
                                  f"{event['key']!r}, the chain began with {record_key!r}")
            if auth and scheme_field is not None and auth != scheme_field:
                return ChainCheck(False, count, lineno, f"carries a {auth}, the chain began "
                                  f"with a {scheme_field}")
            if checker is not None and auth and not checker.check(event["hash"], event[auth]):
                what = ("signature (sig) does not verify under public key" if auth == "sig"
                        else "authentication code (mac) does not match the legacy HMAC key")
                return ChainCheck(False, count, lineno, f"bad signature: {what} {record_key}: "
                                  "the event was edited or re-signed without the operator's "
                                  "key", key_id=record_key, scheme=SCHEMES[auth])
            prev = event["hash"]
            count += 1
    scheme = SCHEMES.get(scheme_field or "")
    if count == 0:
        return ChainCheck(True, 0, auth_note="no events")
    if unsigned is not None:
        note = (f"line {unsigned} carries no signature (unauthenticated: signatures stripped)"
                if record_key is not None or unsigned > 1
                else "no event carries a signature (unauthenticated: signatures stripped, or a "
                     "record older than the record keys)")
        return ChainCheck(True, count, key_id=record_key, auth_note=note, scheme=scheme)
    if checker is None:
        return ChainCheck(True, count, key_id=record_key, scheme=scheme,
                          auth_note=_missing_key_note(scheme or ED25519, str(record_key), given))
    return ChainCheck(True, count, authenticated=True, key_id=record_key, scheme=scheme)


def read_events(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def first_non_canonical_line(path: str | Path, stop: int | None = None) -> int | None:
    """The first line (1-based, before line `stop`) not in the canonical form `EventLog`
    writes (an event edited by hand), or None; reading stops at a line that is not JSON."""
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if stop is not None and lineno >= stop:
                return None
            try:
                canonical = canonical_json(json.loads(raw)) + b"\n"
            except ValueError:
                return None
            if raw != canonical:
                return lineno
    return None


def read_events_tolerant(run_dir_or_path: str | Path
                         ) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """(events, [(line, problem)]) of a run directory's events.jsonl (or the file itself), each
    event with its 1-based `_line`; a line that is not a JSON object is reported, not fatal (the
    analysis reads a damaged record to report on it). ([], []) without the file."""
    path = Path(run_dir_or_path)
    if path.is_dir():
        path = path / EVENTS_FILE
    return read_jsonl_tolerant(path)


# ----------------------------------------------------------------------------- writing
def _last_line(fd: int) -> bytes | None:
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0:
        return None
    block, data = 4096, b""
    pos = size
    while pos > 0:
        step = min(block, pos)
        pos -= step
        data = os.pread(fd, step, pos) + data
        stripped = data.rstrip(b"\n")
        if b"\n" in stripped:
            return stripped.rsplit(b"\n", 1)[1]
    return data.rstrip(b"\n") or None


class EventLog:
    """Appends chained events to `events.jsonl` from any number of processes.

    The runtime and the grader service both record events; an exclusive `flock` around
    read-last-line + append + fsync keeps the chain linear. Reopening continues the chain (resume).
    Every event is signed with `key` (default: the operator's signing key, created on first use);
    appending to a chain begun under another key (or a legacy HMAC chain) is refused.
    """

    def __init__(self, path: str | Path, verify: bool = True, key: SigningKey | None = None):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._key = key
        if verify and self.path.exists() and self.path.stat().st_size:
            check = verify_events(self.path, self.key)
            if not check.ok:
                raise ValueError(f"{self.path}:{check.bad_line}: {check.reason}; refusing to append")

    @property
    def key(self) -> SigningKey:
        if self._key is None:
            self._key = operator_key()
        return self._key

    def emit(self, payload: EventPayload) -> dict[str, Any]:
        """Append one typed event."""
        return self.append(payload.TYPE, payload.to_dict())

    def append(self, type_: str, data: dict[str, Any] | EventPayload | None = None
               ) -> dict[str, Any]:
        if isinstance(data, EventPayload):
            data = data.to_dict()
        key = self.key
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                last = _last_line(fd)
                if last is None:
                    prev, seq = GENESIS, 0
                else:
                    tail = json.loads(last)
                    prev, seq = tail["hash"], tail["seq"] + 1
                    if tail.get("key") != key.id or "sig" not in tail:
                        under = "legacy HMAC key" if "mac" in tail else "record key"
                        raise ValueError(f"{self.path}: the chain is under {under} "
                                         f"{tail.get('key')!r}, this writer holds {key.id}; "
                                         "refusing to append")
                event = {"seq": seq, "ts": utc_now(), "type": type_, "data": data or {},
                         "prev": prev, "key": key.id}
                event["hash"] = event_hash(event)
                event["sig"] = key.sign(event["hash"])
                os.write(fd, canonical_json(event) + b"\n")
                os.fsync(fd)
                return event
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
