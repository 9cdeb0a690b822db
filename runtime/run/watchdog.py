"""The deadline, kept by a thread that no file operation can hold.

    watchdog = DeadlineWatchdog(proc, remaining_s, grace)
    watchdog.start()          # at the deadline: proc.stop(grace) (the whole tree), from here
    watchdog.fired            # threading.Event, set the moment the stop begins
    watchdog.wait_stopped()   # the stop report, once the tree is gone
    watchdog.cancel()         # the agent exited first

The supervision loop records the `deadline_reached` event and refreshes state; whatever it is
blocked on, the stop does not wait for it: the kill needs no file of the run or the workspace.
"""

from __future__ import annotations

import threading
import time


class DeadlineWatchdog:
    def __init__(self, proc, remaining_s: float, grace: float):
        self.proc = proc
        self.grace = grace
        self.at = time.monotonic() + max(0.0, float(remaining_s))
        self.fired = threading.Event()
        self._cancelled = threading.Event()
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self.report: dict | None = None
        self._thread = threading.Thread(target=self._run, name="a2c-deadline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._cancelled.is_set():
            left = self.at - time.monotonic()
            if left <= 0:
                self.fire()
                return
            self._cancelled.wait(min(left, 1.0))

    def fire(self) -> None:
        """Stop the tree now (once, whoever calls first)."""
        with self._lock:
            if self.fired.is_set():
                return
            self.fired.set()
        try:
            self.report = self.proc.stop(grace=self.grace)
        except Exception as exc:  # noqa: BLE001 - the report says it; the loop still ends
            self.report = {"error": f"{type(exc).__name__}: {exc}", "survivors": None}
        finally:
            self._stopped.set()

    def wait_stopped(self, timeout: float | None = None) -> dict | None:
        self._stopped.wait(timeout)
        return self.report

    def cancel(self) -> None:
        self._cancelled.set()
