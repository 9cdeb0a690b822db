"""What a maintainer sees while a sweep runs: counts (queued, running, finished, failed) and the
best score so far per task — a rich live table on a terminal, one line per change otherwise (CI
logs, `nohup`)."""

from __future__ import annotations

import time

from .record import SweepRecord


class SweepProgress:
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

    def _table(self):
        from rich.table import Table
        counts = self.record.counts()
        table = Table(title=f"a2c sweep {self.record.data['suite']} — "
                            f"{time.monotonic() - self.start:.0f}s", show_header=True)
        for name in ("queued", "running", "finished", "failed"):
            table.add_column(name, justify="right")
        table.add_row(*(str(counts.get(n, 0)) for n in ("queued", "running", "finished",
                                                         "failed")))
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
        counts = self.record.counts()
        state = " ".join(f"{k}={v}" for k, v in counts.items())
        text = f"[dim]{elapsed:7.1f}s[/dim] {escape(message)}  [dim]({state})[/dim]"
        if self.live is not None:
            self.live.console.print(text)
            self.live.update(self._table())
        else:
            self.console.print(text)

    def tick(self) -> None:
        if self.live is not None:
            self.live.update(self._table())

    def close(self) -> None:
        if self.live is not None:
            self.live.update(self._table())
            self.live.stop()
