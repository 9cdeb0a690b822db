"""`Runner`: drives one run (fresh or resumed) from the grader's start to `run_finished`.

    summary = execute(ctx)      # baseline, agent under the budget guard, drain, finish

The phases live beside it, one concern each: the scaffold's pre-flight
(`scaffold_preflight`), its driver gateway (`driver_link`), the task's services
(`task_services`), the agent under the wall clock (`supervise`), snapshots (`run_snapshots`),
what the run prints (`progress`) and how it ends (`ending`). The run's limits are one `Budget`
(a2c/contracts/budget.py), read by attribute.
"""

from __future__ import annotations

import threading
import time

from a2c.contracts.run_info import AgentExit, RunStatus
from a2c.contracts.service_config import update_service_config
from a2c.durations import format_duration
from a2c.runtime.budget import BudgetGuard
from a2c.runtime.process_record import record_agent
from a2c.runtime.redact import passed_secrets, write_redact_file
from a2c.runtime.run import ending
from a2c.runtime.run.agent import (
    CONFINED,
    copy_transcript,
    log_tail,
    sandbox_spec,
    task_format,
    update_run_meta,
)
from a2c.runtime.run.context import Reporter, RunContext
from a2c.runtime.run.driver_link import DriverLink
from a2c.runtime.run.grader import GraderProcess
from a2c.runtime.run.prepare import grader_cfg, remove_run_dir
from a2c.runtime.run.progress import SubmissionNews
from a2c.runtime.run.resolve import load_agent_spec
from a2c.runtime.run.run_snapshots import RunSnapshots
from a2c.runtime.run.scaffold import PreflightError, uses_gateway
from a2c.runtime.run.scaffold_preflight import preflight
from a2c.runtime.run.scoring import RunScores, baseline_score, pending, score_run
from a2c.runtime.run.seal import seal_record
from a2c.runtime.run.supervise import Supervision
from a2c.runtime.run.task_services import TaskServices
from a2c.timefmt import iso_utc

# what run_started records of run.json
STARTED_FIELDS = ("run_id", "task", "level", "agent", "agent_digest", "driver", "mode", "seed",
                  "backend", "isolation", "base_model", "data", "bundle_digest", "spec_hash",
                  "budget", "scoring", "versions", "driver_server")
TAIL_LINES = 20
# the baseline is announced only when it takes longer than this (an evaluation, not a cache hit)
BASELINE_ANNOUNCE_S = 1.0
DRAIN_MARGIN_S = 30.0


class Runner:
    """Drives one run (fresh or resumed) from the grader's start to `run_finished`."""

    def __init__(self, ctx: RunContext, report: Reporter = print):
        self.ctx = ctx
        self.run_dir = ctx.run_dir
        self.paths = ctx.paths
        self.run = ctx.run
        self.report = report
        self.service = GraderProcess(self.run_dir, ctx.run)
        self.services = TaskServices(self.run_dir, report)
        self.snapshots = RunSnapshots(self.paths, ctx.events, report)
        self.news = SubmissionNews(self.run_dir, report)
        self.scores = RunScores()
        self.agent = load_agent_spec(self.paths.agent, verify=False)  # the run's own copy
        self.secrets = passed_secrets(self.agent)   # pass_env values redacted from the record
        # a scaffold's driver gateway (runtime/driver_gateway): its own process, like the grader
        self.driver = DriverLink(self.paths, self.run, report) \
            if uses_gateway(self.agent) else None
        self.fresh = False      # a run just prepared: a failed pre-flight leaves nothing of it
        if self.driver is not None and (key := self.driver.key()) is not None:
            self.secrets["A2C_DRIVER_KEY"] = key   # never in the record
        if self.paths.token.is_file():   # the per-run grader token: never in the record either
            self.secrets["A2C_TOKEN"] = self.paths.token.read_text(encoding="utf-8").strip()

    # ---------------------------------------------------------------- helpers
    def event(self, type_: str, data: dict | None = None) -> dict:
        return self.ctx.events.append(type_, data or {})

    def refresh(self) -> RunScores:
        """run.json's scores and driver totals from the journal and the gateway; each
        submission announced once."""
        self.scores = score_run(self.run_dir, self.run.scoring_spec.policy)
        self.scores.apply_to(self.run)
        self.run.baseline_score = baseline_score(self.run_dir)
        if self.driver is not None:
            self.driver.refresh()
        self.ctx.save()
        self.news.announce()
        return self.scores

    def safely(self, fn, *args) -> None:
        try:
            fn(*args)
        except OSError as exc:   # the agent's workspace refused the write: the run goes on
            self.report(f"note: {getattr(fn, '__name__', fn)} failed: {exc}")

    def stop_services(self) -> None:
        """The grader, the gateway, the task's services, their short socket folders."""
        self.service.stop()
        if self.driver is not None:
            self.driver.stop()
        self.services.stop()
        ending.release_temp_socket_dirs(self.paths)

    def discard(self) -> None:
        """A fresh run whose pre-flight failed: stop what it started and remove its directory."""
        try:
            if self.driver is not None:
                self.driver.stop()
        except Exception:  # noqa: BLE001 - removing it anyway
            pass
        remove_run_dir(self.run_dir)

    def backend(self):
        from a2c.runtime.sandbox import get_backend
        if self.run.backend == "local":
            return get_backend("local", use_bwrap=self.run.options.use_bwrap)
        return get_backend(self.run.backend)

    # ---------------------------------------------------------------- phases
    def baseline(self) -> None:
        if self.paths.baseline_result.is_file():
            self.run.baseline_score = baseline_score(self.run_dir)
            return
        from a2c.runtime.grader_service.baseline import compute_baseline_for_run
        from a2c.runtime.run.devices import grader_devices
        # announced only when it takes a while (an evaluation): a cache hit is one line, never
        # "scoring the base model" followed by "(cached)"
        done = threading.Event()
        lock = threading.Lock()

        def announce() -> None:
            with lock:
                if not done.is_set():
                    self.report("scoring the base model on the held-out split (baseline; kept "
                                "for later runs of this task, model and grader)")
        timer = threading.Timer(BASELINE_ANNOUNCE_S, announce)
        timer.daemon = True
        timer.start()
        try:
            with grader_devices(self.run):   # on the grader's GPUs, never the agent's
                summary = compute_baseline_for_run(self.run_dir)
        finally:
            with lock:
                done.set()
            timer.cancel()
        self.run.baseline_score = summary.score
        if not summary.valid:
            self.report(f"baseline evaluation FAILED (not scored as 0): {summary.error}")
        elif summary.cached:
            self.report(f"baseline score {summary.score:.1f} (cached: scored by an earlier "
                        "run of this task, base model and grader)")
        else:
            self.report(f"baseline score {summary.score:.1f} (scored in "
                        f"{float(summary.elapsed_s or 0):.0f}s)")
        self.ctx.save()

    def launch_agent(self, backend):
        confined = backend.isolation in CONFINED
        return backend.start(sandbox_spec(self.agent, self.run, self.paths, confined,
                                          self.services.proxies))

    def guard(self) -> BudgetGuard:
        """The wall clock's guard; the deadline fixed when the agent first starts (a resumed
        run keeps it)."""
        run, wall = self.run, float(self.run.budget.wall_clock_s)
        if run.deadline is None:
            now = time.time()
            run.agent_started_at = iso_utc(now)
            run.deadline = now + wall
            run.task_format = task_format(grader_cfg(self.paths.bundle, {}))
        guard = BudgetGuard(started_at=run.deadline - wall, wall_clock_s=wall)
        guard.warned = {t for t in guard.thresholds if guard.fraction_used() >= t}
        return guard

    def run_agent(self, backend, guard: BudgetGuard, resumed: bool) -> None:
        run = self.run
        self.event("agent_started", {"deadline": run.deadline, "wall_clock_s": guard.wall_clock_s,
                                     "isolation": backend.isolation, "resumed": resumed})
        self.report(f"launching agent {run.agent} ({backend.isolation} sandbox), "
                    f"budget {format_duration(guard.remaining())}")
        proc = self.launch_agent(backend)
        # what ran, seen from the host (runtime/process_record.py); its digest into the chain
        recorder = record_agent(self.paths, proc, backend, self.secrets,
                                run.options.process_interval_s)
        try:
            if getattr(proc, "limits", None):   # the local backend's cgroup: what it enforces
                run.limits = proc.limits
                if proc.limits_warning:
                    self.report(proc.limits_warning)
            outcome = Supervision(self, proc, guard).run()
        finally:
            self.event("process_record", recorder.stop())
        run.agent_exit = ended = outcome.exit
        self.ctx.save()
        self.event("agent_exited", outcome.event())
        self.report(f"agent exited ({ended.reason}, rc {ended.returncode}"
                    + (f"; {ended.cause})" if ended.cause else ")"))

    def finish(self, status: RunStatus | None = None) -> dict:
        """Drain, stop the services, redact, score; `status` None: by `ending.end_status`."""
        self.snapshots.final()
        waiting = pending(self.run_dir)
        self.drain(float(self.run.budget.eval_timeout_s) * max(1, len(waiting))
                   + DRAIN_MARGIN_S)
        self.stop_services()
        ending.score_final_split(self.run, self.paths, self.report)
        ending.redact_logs(self.paths, self.secrets, self.report)
        transcript = copy_transcript(self.agent, self.paths, self.secrets)
        scores = self.refresh()
        if status is None:
            spent = self.driver is not None and self.driver.spent()
            status = ending.end_status(self.run.agent_exit, scores.submissions, spent)
        run = self.run
        run.status, run.ended_at, run.transcript = status, iso_utc(time.time()), transcript
        if status != RunStatus.FINISHED:
            run.agent_log_tail = log_tail(self.paths.agent_log, self.secrets, TAIL_LINES)
        self.ctx.save()
        self.event("run_finished", {"baseline_score": run.baseline_score,
                                    "best_score": scores.best_score,
                                    "final_score": scores.final_score,
                                    "submissions": scores.submissions,
                                    "valid_submissions": scores.valid_submissions,
                                    "status": status.value, **ending.final_split_values(run)})
        seal_record(self.ctx, status)
        return ending.summary(run, self.run_dir, self.driver is not None, self.secrets)

    def drain(self, timeout: float) -> None:
        """Let accepted submissions finish scoring (the deadline never cuts an evaluation)."""
        end = time.monotonic() + timeout
        announced = False
        while time.monotonic() < end:
            waiting = pending(self.run_dir)
            if not waiting:
                return
            if not announced:
                self.report(f"waiting for {len(waiting)} evaluation(s) to finish")
                announced = True
            if not self.service.alive():
                self.service.start()
            self.refresh()
            time.sleep(0.5)
        self.report("gave up waiting for pending evaluations: "
                    + ", ".join(pending(self.run_dir)))

    # ---------------------------------------------------------------- the run
    def go(self, resumed: bool = False) -> dict:
        from a2c.runtime.run.devices import held
        with held(self.run_dir, self.run):   # the run's GPUs locked until it ends
            try:
                return self._go(resumed)
            except PreflightError:
                if self.fresh:
                    self.discard()
                else:
                    self._abort(RunStatus.FAILED)
                raise
            except KeyboardInterrupt:
                self._abort(RunStatus.INTERRUPTED)
                raise
            except Exception:
                self._abort(RunStatus.FAILED)
                raise

    def _start(self, backend, resumed: bool) -> None:
        """The sandbox's image, the pre-flight (a fresh run) or the gateway, run_started."""
        run = self.run
        run.isolation = backend.isolation
        warning = getattr(backend, "warning", lambda: None)()
        if warning:
            self.report(warning)
        if hasattr(backend, "prepare_image"):   # docker: built or reused before any budget
            backend.report = self.report
            backend.prepare_image(self.paths.bundle, self.paths.agent)
        if self.fresh and self.driver is not None:   # before anything is spent
            preflight(self.agent, run, self.paths, self.driver, backend, self.report)
        elif self.driver is not None:
            self.driver.start()
        if not resumed:
            run.status = RunStatus.RUNNING
            run.started_at = iso_utc(time.time())
            self.ctx.save()
            recorded = run.to_dict()
            self.event("run_started", {k: recorded.get(k) for k in STARTED_FIELDS})

    def _go(self, resumed: bool) -> dict:
        run = self.run
        backend = self.backend()
        self._start(backend, resumed)
        self.services.start()
        self.baseline()
        guard = self.guard()
        agent_out = "/workspace/output" if backend.isolation in CONFINED \
            else str(self.paths.output)
        update_service_config(self.run_dir, deadline_unix=run.deadline,
                              agent_output_dir=agent_out)
        self.safely(update_run_meta, self.paths, run, guard.remaining())
        if self.secrets:   # read by every snapshot, the grader service's too, until finish
            write_redact_file(self.paths.snapshots, self.secrets)
        self.ctx.save()
        self.report("starting the grader service")
        self.service.start()
        self.refresh()
        if run.agent_exit is None and guard.remaining() > 1:
            self.run_agent(backend, guard, resumed)
        elif run.agent_exit is None:
            self.event("deadline_reached", {"deadline": run.deadline,
                                            "wall_clock_s": guard.wall_clock_s,
                                            "note": "no budget left at resume"})
            run.agent_exit = AgentExit(None, "no budget left at resume")
            self.event("agent_exited", run.agent_exit.to_dict())
        return self.finish()

    def _abort(self, status: RunStatus) -> None:
        try:
            from a2c.runtime.sandbox.proctree import kill_tree
            kill_tree(None, None, self.run.sandbox_id, grace=2.0)
            self.stop_services()
            ending.redact_logs(self.paths, self.secrets, self.report)
            if self.driver is not None:
                self.driver.refresh()
            self.run.status, self.run.ended_at = status, iso_utc(time.time())
            self.ctx.save()
            seal_record(self.ctx, status)
        except Exception:  # noqa: BLE001 - best effort while failing
            pass


def execute(ctx: RunContext, report: Reporter = print) -> dict:
    runner = Runner(ctx, report)
    runner.fresh = True
    return runner.go(resumed=False)
