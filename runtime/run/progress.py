"""What a run prints while the agent works: the periodic heartbeat, the agent's first call to
its driver, each submission received and scored. Only what the runtime, the grader's journal and
the gateway recorded, never the agent's output (a line the agent could forge would be read as
the runtime's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2c.contracts.journal import JournalReceived, journal_state
from a2c.durations import format_duration
from a2c.runtime.run.context import Reporter
from a2c.runtime.run.scoring import RunScores, scored_entries


def heartbeat_line(elapsed_s: float, wall_clock_s: float, scores: RunScores,
                   usage: dict[str, Any] | None = None) -> str:
    """The periodic progress line: `agent running 2m00s of 10m00s: 14 driver calls, 210,400
    tokens, $0.1234; 1 submission (1 scored, best 63.0)` (no driver part for an agent without
    a gateway; `usage` as `runtime/run/driver.py:usage_summary` gives it)."""
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


def _driver_part(usage: dict[str, Any]) -> str:
    calls = int(usage.get("calls") or 0)
    if calls:
        text = f"{calls} driver call{'s' if calls != 1 else ''}, " \
               f"{int(usage.get('tokens') or 0):,} tokens"
        if usage.get("cost_usd"):
            text += f", ${float(usage['cost_usd']):.4f}"
    else:
        text = "no driver call yet"
    if usage.get("errors"):
        text += f", {usage['errors']} error(s)"
    if usage.get("exhausted"):
        text += ", driver budget spent"
    return text


def first_call_line(totals: dict[str, Any]) -> str:
    """The line for the agent's first call to its driver gateway (what totals.json says once its
    `seq` left 0): the model it reached, or that it was refused or failed."""
    models = list((totals.get("by_model") or {}).keys())
    model = models[0] if models else (totals.get("model") or "?")
    if int(totals.get("calls") or 0):
        return (f"driver: the agent's first call reached {model} "
                f"({int(totals.get('tokens') or 0):,} tokens so far)")
    if int(totals.get("errors") or 0):
        return (f"driver: the agent's first call to {model} was refused or failed "
                f"({totals['errors']} error(s); logs/driver-gateway.log)")
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
