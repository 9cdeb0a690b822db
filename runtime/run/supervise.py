"""The agent's run under the wall clock: wait for it to exit or the deadline, stop its whole
tree at the deadline, and meanwhile keep the run's state fresh (scores, run_meta.json, the
grader and the gateway alive, snapshots, the heartbeat).

The deadline is kept by a watchdog thread (`runtime/run/watchdog.py:DeadlineWatchdog`) that
stops the tree whatever this loop is doing; the periodic snapshot runs in its own thread, so no
file operation on the agent's workspace can hold the loop or the kill. The loop's pace is the
run's `options` (snapshot_every_s, meta_every_s, heartbeat_every_s) or the defaults here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from a2c.contracts.run_info import AgentExit
from a2c.durations import format_duration
from a2c.runtime.budget import BudgetGuard
from a2c.runtime.run.agent import update_run_meta
from a2c.runtime.run.context import SNAPSHOT_EVERY_S, STOP_GRACE_S
from a2c.runtime.run.driver import usage_summary
from a2c.runtime.run.progress import DriverUse, heartbeat_line
from a2c.runtime.run.watchdog import DeadlineWatchdog

# progress while the agent runs: one line at most this often (elapsed, driver use, submissions)
HEARTBEAT_EVERY_S = 60.0
META_EVERY_S = 15.0       # run_meta.json in the agent's workspace (its remaining time)
REFRESH_EVERY_S = 2.0     # scores from the journal, the grader and the gateway kept alive


@dataclass(frozen=True)
class Outcome:
    """The supervision's end: how the agent ended (run.json's `agent_exit`) and, where the
    runtime stopped its tree, the stop report."""

    exit: AgentExit
    stop: dict[str, Any] | None = None

    def event(self) -> dict[str, Any]:
        """The `agent_exited` event's data."""
        out = self.exit.to_dict()
        if self.stop:
            out["stop"] = {k: self.stop.get(k) for k in ("terminated", "killed", "elapsed_s",
                                                         "survivors")}
        return out


class Supervision:
    """One supervision of the agent's process `proc` by `runner` (runtime/run/runner.py)."""

    def __init__(self, runner, proc, guard: BudgetGuard):
        self.runner, self.proc, self.guard = runner, proc, guard
        options = runner.run.options
        self.snapshot_every = float(options.snapshot_every_s or SNAPSHOT_EVERY_S)
        self.meta_every = float(options.meta_every_s or META_EVERY_S)
        self.beat_every = float(options.heartbeat_every_s or HEARTBEAT_EVERY_S)
        now = time.monotonic()
        self.last = {"snapshot": now, "meta": 0.0, "refresh": 0.0, "beat": now}

    def run(self) -> Outcome:
        runner, guard, proc = self.runner, self.guard, self.proc
        watchdog = DeadlineWatchdog(proc, guard.remaining(), STOP_GRACE_S)
        watchdog.start()
        reason, stop_report = "exited", None
        try:
            while True:
                rc = proc.poll()
                self._warn()
                if rc is not None and not watchdog.fired.is_set():
                    break
                if watchdog.fired.is_set() or guard.deadline_hit:
                    watchdog.fire()           # (idempotent) the watchdog may be a tick late
                    runner.event("deadline_reached", {"deadline": guard.deadline,
                                                      "wall_clock_s": guard.wall_clock_s})
                    runner.report("deadline reached: stopping the agent's process tree")
                    stop_report, reason = watchdog.wait_stopped(), "deadline"
                    break
                self._keep_fresh(time.monotonic())
                watchdog.fired.wait(0.25)
        finally:
            watchdog.cancel()
        return self._exit(reason, stop_report)

    def _warn(self) -> None:
        for type_, data in self.guard.tick():
            if type_ == "budget_warning":
                self.runner.event(type_, data)
                self.runner.report(f"budget: {int(data['fraction'] * 100)}% used, "
                                   f"{format_duration(data['remaining_s'])} left")

    def _due(self, what: str, every: float, now: float) -> bool:
        if now - self.last[what] < every:
            return False
        self.last[what] = now
        return True

    def _keep_fresh(self, now: float) -> None:
        runner = self.runner
        if self._due("meta", self.meta_every, now):
            runner.safely(update_run_meta, runner.paths, runner.run, self.guard.remaining())
        if self._due("refresh", REFRESH_EVERY_S, now):
            runner.refresh()
            if not runner.service.alive():
                runner.report("the grader service died; restarting it on the same journal")
                runner.service.start()
            if runner.driver is not None and not runner.driver.alive():
                runner.report("the driver gateway died; restarting it")
                runner.driver.restart_safely()
        if self._due("beat", self.beat_every, now):
            self.heartbeat()
        if self._due("snapshot", self.snapshot_every, now):
            runner.snapshots.in_background("periodic")

    def heartbeat(self) -> None:
        """The periodic progress line (`heartbeat_line`), from run.json's refreshed state; a
        failure to read it costs the line, never the run."""
        runner, guard = self.runner, self.guard
        try:
            usage = None if runner.driver is None else \
                DriverUse.of(usage_summary(runner.run.driver_usage))
            line = heartbeat_line(guard.wall_clock_s - guard.remaining(), guard.wall_clock_s,
                                  runner.scores, usage)
        except (OSError, ValueError, TypeError, KeyError):
            return
        runner.report(line)

    def _exit(self, reason: str, stop_report: dict | None) -> Outcome:
        proc = self.proc
        stopped_for = getattr(proc, "stopped_for", None)   # "disk_budget": its watcher stopped it
        if stopped_for and reason == "exited":
            reason, stop_report = stopped_for, getattr(proc, "stop_report", None)
        if hasattr(proc, "close"):
            proc.close()
        cause = getattr(proc, "exit_cause", lambda: None)()   # memory, processes, disk, signal
        if reason == "deadline":
            cause = (f"deadline: its wall clock ({format_duration(self.guard.wall_clock_s)}) "
                     "ran out")
        return Outcome(AgentExit(proc.returncode, reason, cause), stop_report)
