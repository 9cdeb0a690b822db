"""Reading a run directory (see docs/contracts.md, "Run directory") tolerantly.

The analysis never trusts a record it has not verified (`a2c.analysis.verify`), but it must still be
able to *read* a damaged one to report on it with `--force`, so every reader here skips lines it
cannot parse instead of failing, and the submissions are assembled from the events (the
hash-chained record) with the grader's journal filling in what events do not carry (notes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from a2c.contracts.events import read_events_tolerant
from a2c.contracts.grade_result import read_result_or_none
from a2c.contracts.journal import read_journal_lines
from a2c.contracts.records import read_jsonl_tolerant
from a2c.contracts.run_info import read_run_mapping
from a2c.contracts.run_paths import RunPaths
from a2c.errors import A2CError
from a2c.timefmt import iso_utc as iso
from a2c.timefmt import parse_time

__all__ = ["RunRecord", "Submission", "iso", "parse_time", "read_json", "read_jsonl_tolerant",
           "sid"]

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

    def result(self, relative: str) -> dict | None:
        """A results file (``results/<n>.json``) as a dict, cached; None if missing/unreadable."""
        if relative not in self._results:
            path = self.root / relative
            self._results[relative] = read_result_or_none(path) if path.is_file() else None
        return self._results[relative]

    # ------------------------------------------------------------------ events
    def events_of(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == type_]

    def first_event(self, type_: str) -> dict[str, Any] | None:
        for event in self.events:
            if event.get("type") == type_:
                return event
        return None

    @cached_property
    def started_at(self) -> float | None:
        start = parse_time(self.run.get("started_at"))
        if start is None:
            first = self.first_event("run_started") or (self.events[0] if self.events else None)
            start = parse_time(first.get("ts")) if first else None
        return start

    @cached_property
    def clock_start(self) -> float | None:
        """When the agent's budget clock started: the first agent_started event (the runtime
        scores the baseline before it), else run.json agent_started_at, else the run's start."""
        event = self.first_event("agent_started")
        start = parse_time(event.get("ts")) if event else None
        if start is None:
            start = parse_time(self.run.get("agent_started_at"))
        return start if start is not None else self.started_at

    @cached_property
    def agent_ended_at(self) -> float | None:
        """When the agent stopped: the last agent_exited event, else the end of the run."""
        exits = self.events_of("agent_exited")
        end = parse_time(exits[-1].get("ts")) if exits else None
        return end if end is not None else self.ended_at

    @cached_property
    def ended_at(self) -> float | None:
        end = parse_time(self.run.get("ended_at"))
        if end is None:
            finished = self.first_event("run_finished")
            if finished:
                end = parse_time(finished.get("ts"))
        if end is None and self.events:
            end = parse_time(self.events[-1].get("ts"))
        return end

    @cached_property
    def deadline(self) -> float | None:
        deadline = parse_time(self.run.get("deadline"))
        if deadline is None and self.clock_start is not None:
            wall = (self.budget or {}).get("wall_clock_s")
            if isinstance(wall, (int, float)):
                deadline = self.clock_start + float(wall)
        return deadline

    @property
    def budget(self) -> dict[str, Any]:
        budget = self.run.get("budget")
        if isinstance(budget, dict):
            return budget
        started = self.first_event("run_started")
        if started and isinstance(started.get("data", {}).get("budget"), dict):
            return started["data"]["budget"]
        return {}

    def rel_time(self, ts: float | None) -> float | None:
        """Seconds on the agent's budget clock (since `clock_start`)."""
        if ts is None or self.clock_start is None:
            return None
        return round(ts - self.clock_start, 3)

    @cached_property
    def baseline_score(self) -> float | None:
        event = self.first_event("baseline_scored")
        if event and isinstance(event.get("data", {}).get("score"), (int, float)):
            return float(event["data"]["score"])
        value = self.run.get("baseline_score")
        return float(value) if isinstance(value, (int, float)) else None

    @cached_property
    def snapshots(self) -> list[dict[str, Any]]:
        """Snapshot events in order: {commit, reason, submission_id, ts, files, bytes}."""
        out = []
        for event in self.events_of("snapshot"):
            data = event.get("data") or {}
            if not data.get("commit"):
                continue
            out.append({"commit": data["commit"], "reason": data.get("reason"),
                        "submission_id": None if data.get("submission_id") is None
                        else sid(data["submission_id"]),
                        "ts": parse_time(event.get("ts")), "files": data.get("files"),
                        "bytes": data.get("bytes")})
        return out

    # ------------------------------------------------------------------ submissions
    @cached_property
    def submissions(self) -> list[Submission]:
        subs: dict[str, Submission] = {}

        def get(raw_id: Any) -> Submission:
            key = sid(raw_id)
            if key not in subs:
                subs[key] = Submission(id=key, index=len(subs) + 1)
            return subs[key]

        for event in self.events:
            data = event.get("data") or {}
            kind = event.get("type")
            if kind == "submission_received" and "id" in data:
                sub = get(data["id"])
                sub.received_at = parse_time(event.get("ts"))
                sub.model_path = data.get("model_path")
                sub.weights_hash = data.get("weights_hash")
                sub.note = data.get("note", sub.note)
                sub.received_line = event.get("_line")
            elif kind == "submission_scored" and "id" in data:
                sub = get(data["id"])
                sub.scored = True
                sub.scored_at = parse_time(event.get("ts"))
                score = data.get("score")
                sub.score = float(score) if isinstance(score, (int, float)) else None
                ci = data.get("ci95")
                if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(
                        isinstance(v, (int, float)) for v in ci):
                    sub.ci95 = [float(ci[0]), float(ci[1])]
                sub.valid = bool(data.get("valid", sub.score is not None))
                sub.error = data.get("error")
                sub.code = data.get("code")
                if isinstance(data.get("copy_of_base"), bool):
                    sub.copy_of_base = data["copy_of_base"]
                dup = data.get("duplicate_of")
                sub.duplicate_of = None if dup is None else sid(dup)
                sub.elapsed_s = data.get("elapsed_s")
                sub.backend = data.get("backend")
                sub.scored_line = event.get("_line")
        for row in self.journal:
            if "id" not in row:
                continue
            sub = get(row["id"])
            if row.get("op") == "received":
                sub.note = row.get("note") if sub.note is None else sub.note
                if sub.received_at is None:
                    sub.received_at = parse_time(row.get("ts"))
                sub.model_path = sub.model_path or row.get("model_path")
                sub.weights_hash = sub.weights_hash or row.get("weights_hash")
            elif row.get("op") == "scored":
                sub.result_file = row.get("result")
                sub.code = sub.code or row.get("code")
                if sub.copy_of_base is None and isinstance(row.get("copy_of_base"), bool):
                    sub.copy_of_base = row["copy_of_base"]
        for snap in self.snapshots:
            if snap["submission_id"] is not None and snap["submission_id"] in subs:
                subs[snap["submission_id"]].snapshot = snap["commit"]
        ordered = sorted(subs.values(), key=lambda s: (s.received_at is None,
                                                       s.received_at or 0.0, s.index))
        for index, sub in enumerate(ordered, start=1):
            sub.index = index
            result = RunPaths(self.root).result(sub.id)
            if sub.result_file is None and result.is_file():
                sub.result_file = result.relative_to(self.root).as_posix()
        return ordered
