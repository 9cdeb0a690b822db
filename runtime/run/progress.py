"""What a run prints while the agent works: the periodic heartbeat, the agent's first call to
its driver, each submission received and scored. Only what the runtime, the grader's journal and
the gateway recorded, never the agent's output (a line the agent could forge would be read as
the runtime's)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from a2c.contracts.journal import JournalReceived, journal_state
from a2c.contracts.run_summary import DriverUsage
from a2c.durations import format_duration
from a2c.runtime.run.context import Reporter
from a2c.runtime.run.scoring import RunScores, scored_entries


@dataclass(frozen=True)
class DriverUse(DriverUsage):
    """The gateway's running totals as these lines read them (driver/totals.json as the ledger
    writes it, or `runtime/run/driver.py:usage_summary`'s digest of it), parsed once: the
    summary's numbers (`DriverUsage`) and what the progress lines add."""

    seq: int = 0                    # calls begun, answered or not: 0 until the first
    model: str | None = None
    by_model: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> DriverUse:
        data = data or {}
        kinds = {"seq": int, "calls": int, "tokens": int, "cost_usd": float, "errors": int,
                 "input_tokens": int, "output_tokens": int, "cache_read_tokens": int,
                 "cache_write_tokens": int}
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if value is not None:
                values[f.name] = kinds[f.name](value) if f.name in kinds else value
        return cls(**values)

    def summary(self) -> dict[str, Any]:
        """The summary's driver line (`DriverUsage`'s fields). `tokens` counts all four kinds
        (input, output, cache read, cache write), as the gateway, the report and the
        leaderboard do: one total everywhere, its cached part shown beside it."""
        tokens = (self.input_tokens + self.output_tokens + self.cache_read_tokens
                  + self.cache_write_tokens)
        shared = {f.name: getattr(self, f.name) for f in fields(DriverUsage)}
        return DriverUsage(**{**shared, "tokens": tokens}).to_dict()


def heartbeat_line(elapsed_s: float, wall_clock_s: float, scores: RunScores,
                   usage: DriverUse | None = None) -> str:
    """The periodic progress line: `agent running 2m00s of 10m00s: 14 driver calls, 210,400
    tokens, $0.1234; 1 submission (1 scored, best 63.0)` (no driver part for an agent without
    a gateway)."""
    parts = [] if usage is None else [_driver_part(usage)]
    subs = scores.submissions
    if not subs:
        parts.append("no submission yet")
    else:
        text = f"{subs} submission{'s' if subs != 1 else ''} ({scores.scored} scored"
        best = scores.best_score
        text += f", best {float(best):.1f})" if best is not None else ")"
        parts.append(text)
    return (f"agent running {format_duration(elapsed_s)} of {format_duration(wall_clock_s)}: "
            + "; ".join(parts))


def _driver_part(usage: DriverUse) -> str:
    calls = usage.calls
    if calls:
        text = f"{calls} driver call{'s' if calls != 1 else ''}, {usage.tokens:,} tokens"
        if usage.cost_usd:
            text += f", ${usage.cost_usd:.4f}"
    else:
        text = "no driver call yet"
    if usage.errors:
        text += f", {usage.errors} error(s)"
    if usage.exhausted:
        text += ", driver budget spent"
    return text


def first_call_line(totals: DriverUse) -> str:
    """The line for the agent's first call to its driver gateway (what totals.json says once its
    `seq` left 0): the model it reached, or that it was refused or failed."""
    models = list(totals.by_model)
    model = models[0] if models else (totals.model or "?")
    if totals.calls:
        return (f"driver: the agent's first call reached {model} "
                f"({totals.tokens:,} tokens so far)")
    if totals.errors:
        return (f"driver: the agent's first call to {model} was refused or failed "
                f"({totals.errors} error(s); logs/driver-gateway.log)")
    return f"driver: the agent reached its driver gateway (model {model})"


class SubmissionNews:
    """Each submission announced once as received and once as scored (or invalid), however
    often the journal is read."""

    def __init__(self, run_dir: Path, report: Reporter):
        self.run_dir = run_dir
        self.report = report
        self._received: set[str] = set()
        self._scored: set[str] = set()

    def announce(self) -> None:
        for sid, raw in journal_state(self.run_dir)["received"].items():
            if sid not in self._received:
                self._received.add(sid)
                entry = JournalReceived.from_dict(raw)
                self.report(f"submission {sid} received: {entry.model_path}")
        for sid, entry in scored_entries(self.run_dir):
            if sid in self._scored:
                continue
            self._scored.add(sid)
            if entry.valid and entry.score is not None:
                extra = " (copy of the base model)" if entry.copy_of_base else ""
                self.report(f"submission {sid} scored {float(entry.score):.1f}{extra}")
            else:
                self.report(f"submission {sid} invalid: {entry.error}")
