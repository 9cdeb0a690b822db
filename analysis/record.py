"""Reading a run directory (see docs/contracts.md, "Run directory") tolerantly.

The analysis never trusts a record it has not verified (`a2c.analysis.verify`), but it must still be
able to *read* a damaged one to report on it with `--force`, so every reader here skips lines it
cannot parse instead of failing, and the submissions are assembled from the events (the
hash-chained record) with the grader's journal filling in what events do not carry (notes).

A reader asks for typed things: `payloads(RunStarted)` gives each event of that type as its
payload class (a2c.contracts.event_payloads) with its time and line (`Stamped`), `info` the
run.json as a `RunInfo`, `journal_entries` the journal's typed lines, `snapshot_taken` the
snapshots. The event and journal dicts stay (`events`, `journal`) for the checks that look at
a line as written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

from a2c.contracts.event_payloads import (
    AgentExited,
    AgentStarted,
    BaselineScored,
    EventPayload,
    RunFinished,
    RunStarted,
    Snapshot,
    SubmissionReceived,
    SubmissionScored,
    payload_of,
)
from a2c.contracts.events import read_events_tolerant
from a2c.contracts.grade_result import read_result_or_none
from a2c.contracts.journal import (
    JournalEntry,
    JournalReceived,
    JournalScored,
    entry_of,
    read_journal_lines,
)
from a2c.contracts.records import read_jsonl_tolerant
from a2c.contracts.run_info import RunInfo, read_run_mapping
from a2c.contracts.run_paths import RunPaths
from a2c.errors import A2CError
from a2c.timefmt import iso_utc as iso
from a2c.timefmt import parse_time

__all__ = ["RunRecord", "SnapshotTaken", "run_info_of", "Stamped", "Submission", "iso", "parse_time",
           "read_json", "read_jsonl_tolerant", "sid"]

P = TypeVar("P")

# duplicate_of values that name the base model: how records without `copy_of_base` say it.
BASE_COPY_MARKERS = ("baseline", "base", "base_model", "base-model")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def sid(value: Any) -> str:
    """Submission ids compare as strings (the service may use ints)."""
    return str(value)


@dataclass
class Submission:
    id: str
    index: int                      # 1-based order of arrival
    received_at: float | None = None
    scored_at: float | None = None
    model_path: str | None = None
    weights_hash: str | None = None
    note: str | None = None
    scored: bool = False
    score: float | None = None
    ci95: list[float] | None = None
    valid: bool = False
    error: str | None = None
    code: str | None = None         # a2c.contracts.submission_errors code, when invalid
    duplicate_of: str | None = None
    copy_of_base: bool | None = None   # None in records written before the service wrote it
    elapsed_s: float | None = None
    backend: str | None = None
    result_file: str | None = None
    snapshot: str | None = None
    received_line: int | None = None
    scored_line: int | None = None

    @property
    def base_copy(self) -> bool:
        if self.copy_of_base is not None:
            return self.copy_of_base
        # A record from before `copy_of_base` was written: read it from duplicate_of / the error.
        dup = (self.duplicate_of or "").strip().lower()
        if dup in BASE_COPY_MARKERS:
            return True
        err = (self.error or "").lower()
        return "base model" in err and ("copy" in err or "identical" in err or "unchanged" in err)


def run_info_of(run: dict[str, Any]) -> RunInfo:
    """run.json as written, typed: the fields a partial or foreign record lacks take their
    defaults (the identity fields None)."""
    blank = {"run_id": None, "task": None, "agent": None}
    try:
        return RunInfo.from_dict({**blank, **run})
    except (TypeError, ValueError):
        return RunInfo.from_dict(blank)


@dataclass(frozen=True)
class Stamped(Generic[P]):
    """One typed line of a record file: its payload (an event's, a journal entry), when it was
    written (unix seconds; None when the line has no readable time) and its 1-based line."""

    data: P
    ts: float | None
    line: int | None


@dataclass(frozen=True)
class SnapshotTaken:
    """A snapshot of the agent's workspace the record names (a `snapshot` event with a commit)."""

    commit: str
    reason: str | None
    submission_id: str | None
    ts: float | None
    files: int | None
    bytes: int | None


def _stamped(row: dict[str, Any], data: Any) -> Stamped:
    return Stamped(data=data, ts=parse_time(row.get("ts")), line=row.get("_line"))


@dataclass
class RunRecord:
    root: Path
    run: dict[str, Any]
    events: list[dict[str, Any]]
    event_problems: list[tuple[int, str]]
    journal: list[dict[str, Any]]
    journal_problems: list[tuple[int, str]]
    _results: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, root: str | Path) -> RunRecord:
        root = Path(root)
        if not root.is_dir():
            raise A2CError(f"{root}: no such run directory")
        paths = RunPaths(root)
        if not paths.run_json.is_file() and not paths.events.is_file():
            raise A2CError(f"{root}: not a run directory (no run.json, no events.jsonl)")
        try:
            run = read_run_mapping(paths.run_json)
        except (OSError, ValueError, UnicodeDecodeError):
            run = {}
        events, event_problems = read_events_tolerant(paths.events)
        journal, journal_problems = read_journal_lines(root)
        return cls(root=root, run=run, events=events,
                   event_problems=event_problems, journal=journal,
                   journal_problems=journal_problems)

    @cached_property
    def info(self) -> RunInfo:
        """run.json typed (fields of a partial or foreign record take their defaults)."""
        return run_info_of(self.run)

    @property
    def head(self) -> str | None:
        """The hash of the record's last event (what an export names it by)."""
        return self.events[-1].get("hash") if self.events else None

    def result(self, relative: str) -> dict | None:
        """A results file (``results/<n>.json``) as a dict, cached; None if missing/unreadable."""
        if relative not in self._results:
            path = self.root / relative
            self._results[relative] = read_result_or_none(path) if path.is_file() else None
        return self._results[relative]

    # ------------------------------------------------------------------ events
    def events_of(self, type_: str) -> list[dict[str, Any]]:
        """The events of one type as written (dicts); `payloads` gives them typed."""
        return [e for e in self.events if e.get("type") == type_]

    def first_event(self, type_: str) -> dict[str, Any] | None:
        for event in self.events:
            if event.get("type") == type_:
                return event
        return None

    @cached_property
    def stamped_events(self) -> list[Stamped[EventPayload]]:
        """Every event of a type this a2c knows, typed, in order."""
        return [_stamped(event, payload) for event in self.events
                if (payload := payload_of(event)) is not None]

    def payloads(self, cls: type[P]) -> list[Stamped[P]]:
        """The events whose payload is `cls`, typed, in order."""
        return [s for s in self.stamped_events if type(s.data) is cls]  # type: ignore[misc]

    def first_payload(self, cls: type[P]) -> Stamped[P] | None:
        return next((s for s in self.stamped_events if type(s.data) is cls), None)  # type: ignore[misc]

    @cached_property
    def journal_entries(self) -> list[Stamped[JournalEntry]]:
        """The journal's lines typed (a line with an unknown op is left out)."""
        return [_stamped(row, entry) for row in self.journal
                if (entry := entry_of(row)) is not None]

    @cached_property
    def started_at(self) -> float | None:
        start = parse_time(self.info.started_at)
        if start is None:
            first = self.first_payload(RunStarted)
            start = first.ts if first else (parse_time(self.events[0].get("ts"))
                                            if self.events else None)
        return start

    @cached_property
    def clock_start(self) -> float | None:
        """When the agent's budget clock started: the first agent_started event (the runtime
        scores the baseline before it), else run.json agent_started_at, else the run's start."""
        event = self.first_payload(AgentStarted)
        start = event.ts if event else None
        if start is None:
            start = parse_time(self.info.agent_started_at)
        return start if start is not None else self.started_at

    @cached_property
    def agent_ended_at(self) -> float | None:
        """When the agent stopped: the last agent_exited event, else the end of the run."""
        exits = self.payloads(AgentExited)
        end = exits[-1].ts if exits else None
        return end if end is not None else self.ended_at

    @cached_property
    def ended_at(self) -> float | None:
        end = parse_time(self.info.ended_at)
        if end is None:
            finished = self.first_payload(RunFinished)
            if finished:
                end = finished.ts
        if end is None and self.events:
            end = parse_time(self.events[-1].get("ts"))
        return end

    @cached_property
    def deadline(self) -> float | None:
        deadline = parse_time(self.info.deadline)
        if deadline is None and self.clock_start is not None:
            wall = self.wall_clock_s
            if isinstance(wall, (int, float)):
                deadline = self.clock_start + float(wall)
        return deadline

    @property
    def budget(self) -> dict[str, Any]:
        """The run's budget as run.json (else the run_started event) writes it."""
        budget = self.run.get("budget")
        if isinstance(budget, dict):
            return budget
        started = self.first_payload(RunStarted)
        if started and isinstance(started.data.budget, dict):
            return started.data.budget
        return {}

    @property
    def wall_clock_s(self) -> Any:
        return self.budget.get("wall_clock_s")

    def rel_time(self, ts: float | None) -> float | None:
        """Seconds on the agent's budget clock (since `clock_start`)."""
        if ts is None or self.clock_start is None:
            return None
        return round(ts - self.clock_start, 3)

    @cached_property
    def baseline_score(self) -> float | None:
        event = self.first_payload(BaselineScored)
        if event and isinstance(event.data.score, (int, float)):
            return float(event.data.score)
        value = self.info.baseline_score
        return float(value) if isinstance(value, (int, float)) else None

    @cached_property
    def snapshot_taken(self) -> list[SnapshotTaken]:
        """Snapshot events with a commit, in order."""
        return [SnapshotTaken(commit=s.data.commit, reason=s.data.reason,
                              submission_id=None if s.data.submission_id is None
                              else sid(s.data.submission_id),
                              ts=s.ts, files=s.data.files, bytes=s.data.bytes)
                for s in self.payloads(Snapshot) if s.data.commit]

    # ------------------------------------------------------------------ submissions
    @cached_property
    def submissions(self) -> list[Submission]:
        subs: dict[str, Submission] = {}

        def get(raw_id: Any) -> Submission:
            key = sid(raw_id)
            if key not in subs:
                subs[key] = Submission(id=key, index=len(subs) + 1)
            return subs[key]

        for event in self.stamped_events:
            if isinstance(event.data, SubmissionReceived):
                _received(get(event.data.id), event)
            elif isinstance(event.data, SubmissionScored):
                _scored(get(event.data.id), event)
        for row in self.journal_entries:
            if isinstance(row.data, JournalReceived):
                _journal_received(get(row.data.id), row)
            elif isinstance(row.data, JournalScored):
                _journal_scored(get(row.data.id), row.data)
        for snap in self.snapshot_taken:
            if snap.submission_id is not None and snap.submission_id in subs:
                subs[snap.submission_id].snapshot = snap.commit
        ordered = sorted(subs.values(), key=lambda s: (s.received_at is None,
                                                       s.received_at or 0.0, s.index))
        for index, sub in enumerate(ordered, start=1):
            sub.index = index
            result = RunPaths(self.root).result(sub.id)
            if sub.result_file is None and result.is_file():
                sub.result_file = result.relative_to(self.root).as_posix()
        return ordered


def _received(sub: Submission, event: Stamped[SubmissionReceived]) -> None:
    data = event.data
    sub.received_at = event.ts
    sub.model_path = data.model_path
    sub.weights_hash = data.weights_hash
    sub.note = data.note if data.note is not None else sub.note
    sub.received_line = event.line


def _scored(sub: Submission, event: Stamped[SubmissionScored]) -> None:
    data = event.data
    sub.scored = True
    sub.scored_at = event.ts
    sub.score = float(data.score) if isinstance(data.score, (int, float)) else None
    ci = data.ci95
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(
            isinstance(v, (int, float)) for v in ci):
        sub.ci95 = [float(ci[0]), float(ci[1])]
    sub.valid = bool(data.valid)
    sub.error = data.error
    sub.code = data.code
    if isinstance(data.copy_of_base, bool):
        sub.copy_of_base = data.copy_of_base
    sub.duplicate_of = None if data.duplicate_of is None else sid(data.duplicate_of)
    sub.elapsed_s = data.elapsed_s
    sub.backend = data.backend
    sub.scored_line = event.line


def _journal_received(sub: Submission, row: Stamped[JournalReceived]) -> None:
    sub.note = row.data.note if sub.note is None else sub.note
    if sub.received_at is None:
        sub.received_at = row.ts
    sub.model_path = sub.model_path or row.data.model_path
    sub.weights_hash = sub.weights_hash or row.data.weights_hash


def _journal_scored(sub: Submission, entry: JournalScored) -> None:
    sub.result_file = entry.result
    sub.code = sub.code or entry.code
    if sub.copy_of_base is None and isinstance(entry.copy_of_base, bool):
        sub.copy_of_base = entry.copy_of_base
