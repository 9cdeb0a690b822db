"""What a maintainer sees while a sweep runs: counts (queued, running, finished, failed) and the
best score so far per task — a rich live table on a terminal, one line per change otherwise (CI
logs, `nohup`). It is the engine's `SweepEvents`: each event moves the trial along in sweep.json
(record.py) and is said in one line."""

from __future__ import annotations

import time
from pathlib import Path

from a2c.contracts.sweep_file import FAILED

from .engine import SweepEvents
from .plan import TrialPlan
from .record import SweepRecord
from .state import RESUME, TrialOutcome


class SweepProgress(SweepEvents):
    def __init__(self, record: SweepRecord, live: bool | None = None):
        from rich.console import Console
        probe = Console()
        self.console = Console(highlight=False, width=None if probe.is_terminal else 200)
        self.record = record
        self.start = time.monotonic()
        self.live = None
        if live if live is not None else self.console.is_terminal:
            from rich.live import Live
            self.live = Live(self._table(), console=self.console, refresh_per_second=2,
                             transient=False)
            self.live.start()

    # ------------------------------------------------------------------ the engine's events
    def queued(self, plan: TrialPlan, action: str, why: str | None = None) -> None:
        self.record.queued(plan.id)
        if why:
            self.line(f"{plan.id}: {why}; resuming it")

    def running(self, plan: TrialPlan, action: str, attempt: int, log: Path) -> None:
        self.record.running(plan.id, attempt, log)
        self.line(f"{'resuming' if action == RESUME else 'starting'} {plan.id}")

    def ended(self, plan: TrialPlan, out: TrialOutcome) -> None:
        self.record.ended(plan.id, out)
        score = out.best_score
        what = "skipped (done)" if out.skipped else out.status
        tail = f", best {score:.1f}" if isinstance(score, (int, float)) else ""
        reason = f" — {out.reason}" if out.reason and out.status == FAILED else ""
        self.line(f"{plan.id}: {what}{tail}{reason}")

    def tick(self) -> None:
        if self.live is not None:
            self.live.update(self._table())

    # ------------------------------------------------------------------ what is shown
    def _table(self):
        from rich.table import Table
        counts = self.record.counts().to_dict()
        table = Table(title=f"a2c sweep {self.record.sweep.suite} — "
                            f"{time.monotonic() - self.start:.0f}s", show_header=True)
        for name in counts:
            table.add_column(name, justify="right")
        table.add_row(*map(str, counts.values()))
        best = Table(show_header=True, title="best score so far")
        best.add_column("task")
        best.add_column("best", justify="right")
        for task, score in sorted(self.record.best_by_task().items()):
            best.add_row(task, "—" if score is None else f"{score:.1f}")
        from rich.console import Group
        return Group(table, best)

    def line(self, message: str) -> None:
        from rich.markup import escape
        elapsed = time.monotonic() - self.start
        state = " ".join(f"{k}={v}" for k, v in self.record.counts().to_dict().items())
        text = f"[dim]{elapsed:7.1f}s[/dim] {escape(message)}  [dim]({state})[/dim]"
        if self.live is not None:
            self.live.console.print(text)
            self.live.update(self._table())
        else:
            self.console.print(text)

    def close(self) -> None:
        if self.live is not None:
            self.live.update(self._table())
            self.live.stop()
