"""The run's snapshots of the agent's workspace (runtime/snapshots.py) as the runner takes
them: the periodic one in a thread of its own, one at a time, so no file operation on the
agent's workspace ever delays the supervision loop or the kill at the deadline; the final one
after the agent is gone. A snapshot that fails is reported and never stops the run."""

from __future__ import annotations

import threading

from a2c.contracts.events import EventLog
from a2c.contracts.run_paths import RunPaths
from a2c.runtime.run.context import Reporter


class RunSnapshots:
    def __init__(self, paths: RunPaths, events: EventLog, report: Reporter):
        self.paths, self.events, self.report = paths, events, report
        self._thread: threading.Thread | None = None

    def in_background(self, reason: str) -> None:
        if self._thread is not None and self._thread.is_alive():
            self.report(f"snapshot ({reason}) skipped: the previous one is still running")
            return
        self._thread = threading.Thread(target=self.take, args=(reason,), name="a2c-snapshot",
                                        daemon=True)
        self._thread.start()

    def final(self) -> None:
        """After the agent: the one in flight finished first, then the last one."""
        if self._thread is not None:
            self._thread.join(timeout=120)
        self.take("final")

    def take(self, reason: str) -> None:
        try:
            from a2c.contracts.outside import outside_roots
            from a2c.runtime.snapshots import Snapshotter
            info = Snapshotter(self.paths.snapshots, self.paths.workspace,
                               event_log=self.events,
                               outside=outside_roots(self.paths)).snapshot(reason)
            if info.get("skipped"):
                self.report(f"snapshot ({reason}) skipped: {info['skipped']}")
        except Exception as exc:  # noqa: BLE001 - a snapshot failure never stops a run
            self.report(f"snapshot ({reason}) failed: {exc}")
