"""`Runner`: drives one run (fresh or resumed) from the grader's start to `run_finished`.

    summary = execute(ctx)      # baseline, agent under the budget guard, drain, finish
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time

from a2c.contracts.bundle import read_manifest
from a2c.contracts.run_info import RunStatus
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import update_service_config
from a2c.contracts.spec import TaskSpec
from a2c.durations import format_duration
from a2c.errors import A2CError
from a2c.runtime.budget import BudgetGuard
from a2c.runtime.process_record import record_agent
from a2c.runtime.redact import (
    passed_secrets,
    redact_file,
    redact_tree,
    remove_redact_file,
    write_redact_file,
)
from a2c.runtime.run.agent import (
    CONFINED,
    copy_transcript,
    log_tail,
    sandbox_spec,
    task_format,
    update_run_meta,
)
from a2c.runtime.run.context import SNAPSHOT_EVERY_S, STOP_GRACE_S, Reporter, RunContext
from a2c.runtime.run.driver import DriverGateway, read_key, usage_summary
from a2c.runtime.run.grader import GraderProcess
from a2c.runtime.run.prepare import grader_cfg, remove_run_dir
from a2c.runtime.run.reason import reason_line
from a2c.runtime.run.resolve import load_agent
from a2c.runtime.run.scaffold import (
    PreflightError,
    check_command,
    check_script,
    install_hint,
    uses_gateway,
)
from a2c.runtime.run.scoring import baseline_score, journal_state, score_run, sort_key
from a2c.runtime.run.seal import seal_record
from a2c.runtime.run.watchdog import DeadlineWatchdog
from a2c.timefmt import iso_utc

SCORE_KEYS = ("submissions", "valid_submissions", "best_score", "final_score", "best_submission",
              "copies_of_base")
STARTED_KEYS = ("run_id", "task", "level", "agent", "agent_digest", "driver", "mode", "seed",
                "backend", "isolation", "base_model", "data", "bundle_digest", "spec_hash",
                "budget", "scoring", "versions", "driver_server")
SUMMARY_KEYS = ("run_id", "task", "agent", "mode", "isolation", "baseline_score", "best_score",
                "final_score", "submissions", "valid_submissions", "status")
# with a final split (scoring.final): the scores on the items the agent never got feedback on
FINAL_SPLIT_KEYS = ("final_split_score", "final_split_baseline", "selection_gap")
TAIL_LINES = 20
PREFLIGHT_TIMEOUT_S = 120.0
# progress while the agent runs: one line at most this often (elapsed, driver use, submissions);
# a run's options.heartbeat_every_s overrides it
HEARTBEAT_EVERY_S = 60.0
# the baseline is announced only when it takes longer than this (an evaluation, not a cache hit)
BASELINE_ANNOUNCE_S = 1.0


def heartbeat_line(elapsed_s: float, wall_clock_s: float, scores: dict,
                   usage: dict | None = None) -> str:
    """The periodic progress line: `agent running 2m00s of 10m00s: 14 driver calls, 210,400
    tokens, $0.1234; 1 submission (1 scored, best 63.0)` (no driver part for an agent without
    a gateway). Only what the runtime and the gateway recorded, never the agent's output."""
    parts = []
    if usage is not None:
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
        parts.append(text)
    subs = int(scores.get("submissions") or 0)
    if not subs:
        parts.append("no submission yet")
    else:
        scored = int(scores.get("scored") or 0)
        text = f"{subs} submission{'s' if subs != 1 else ''} ({scored} scored"
        best = scores.get("best_score")
        text += f", best {float(best):.1f})" if best is not None else ")"
        parts.append(text)
    return (f"agent running {format_duration(elapsed_s)} of {format_duration(wall_clock_s)}: "
            + "; ".join(parts))


def first_call_line(totals: dict) -> str:
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


def end_status(agent_exit: dict | None, submissions: int,
               driver_spent: bool = False) -> RunStatus:
    """`agent_failed`: the agent exited non-zero on its own (not stopped at the deadline, and not
    after its driver budget was spent: a scaffold whose model stops answering exits non-zero,
    and that is the budget's end, not a failure); `no_submission`: it ended without one
    submission; else `finished`. An agent stopped past its disk budget failed, as one the
    kernel killed for memory."""
    agent_exit = agent_exit or {}
    rc = agent_exit.get("returncode")
    if agent_exit.get("reason") == "disk_budget":
        return RunStatus.AGENT_FAILED
    if agent_exit.get("reason") == "exited" and rc not in (None, 0) and not driver_spent:
        return RunStatus.AGENT_FAILED
    if not submissions:
        return RunStatus.NO_SUBMISSION
    return RunStatus.FINISHED


class Runner:
    """Drives one run (fresh or resumed) from the grader's start to `run_finished`."""

    def __init__(self, ctx: RunContext, report: Reporter = print):
        self.ctx = ctx
        self.run_dir = ctx.run_dir
        self.paths = ctx.paths
        self.run = ctx.run
        self.report = report
        self.service = GraderProcess(self.run_dir, ctx.run)
        self.env_services = None      # the task's environment.services (runtime/env_services/)
        self.env_proxies: dict = {}   # the agent's proxies to them (runtime/env_services/proxy.py)
        self.agent = load_agent(self.paths.agent, verify=False)  # the run's own copy
        self._seen_scored: set[str] = set()
        self._seen_received: set[str] = set()
        self._driver_seen = False    # the agent's first driver call has been announced
        self.secrets = passed_secrets(self.agent)   # pass_env values redacted from the record
        # a scaffold's driver gateway (runtime/driver_gateway): its own process, like the grader
        self.gateway = DriverGateway(self.run_dir) if uses_gateway(self.agent) else None
        self.fresh = False      # a run just prepared: a failed pre-flight leaves nothing of it
        if self.gateway is not None and self.paths.driver_key.is_file():
            self.secrets["A2C_DRIVER_KEY"] = read_key(self.paths)   # never in the record
        if self.gateway is not None:   # resumed: a first call made before was announced then
            self._driver_seen = int((self.gateway.totals() or {}).get("seq") or 0) > 0
        if self.paths.token.is_file():   # the per-run grader token: never in the record either
            self.secrets["A2C_TOKEN"] = self.paths.token.read_text(encoding="utf-8").strip()

    # ---------------------------------------------------------------- helpers
    def event(self, type_: str, data: dict | None = None) -> dict:
        return self.ctx.events.append(type_, data or {})

    def refresh(self) -> dict:
        policy = self.run.scoring_spec.policy
        scores = score_run(self.run_dir, policy)
        self.run.update({k: scores[k] for k in SCORE_KEYS})
        self.run.baseline_score = baseline_score(self.run_dir)
        self.refresh_driver()
        self.ctx.save()
        state = journal_state(self.run_dir)
        for sid, entry in state["received"].items():
            if sid not in self._seen_received:
                self._seen_received.add(sid)
                self.report(f"submission {sid} received: {entry.get('model_path')}")
        for sid, entry in sorted(state["scored"].items(), key=lambda kv: sort_key(kv[0])):
            if sid not in self._seen_scored:
                self._seen_scored.add(sid)
                if entry.get("valid", True) and entry.get("score") is not None:
                    extra = " (copy of the base model)" if entry.get("copy_of_base") else ""
                    self.report(f"submission {sid} scored {float(entry['score']):.1f}{extra}")
                else:
                    self.report(f"submission {sid} invalid: {entry.get('error')}")
        return scores

    def refresh_driver(self) -> None:
        """run.json driver_usage: the gateway's running totals (driver/totals.json)."""
        if self.gateway is None:
            return
        totals = self.gateway.totals()
        if totals is not None:
            self.run.driver_usage = totals
            if not self._driver_seen and int(totals.get("seq") or 0) > 0:
                self._driver_seen = True
                self.report(first_call_line(totals))

    def start_gateway(self) -> None:
        if self.gateway.server_plan():
            self.report(f"starting the driver's vLLM server ({self.run.driver}; log "
                        f"{self.paths.logs / 'driver-server.log'})")
        self.report(f"starting the driver gateway ({self.run.driver})")
        self.gateway.start()
        record = self.gateway.server_record()
        if record is not None:   # what served the driver, into run.json (and run_started)
            self.run.driver_server = record
            self.ctx.save()
            self.report(f"driver server: vLLM {record.get('version') or '?'} serving "
                        f"{record.get('served_model_name')} (context "
                        f"{record.get('max_model_len') or '?'} tokens, tool parser "
                        f"{record.get('tool_call_parser')}, weights "
                        f"{str((record.get('weights') or {}).get('fingerprint'))[:12]})")

    def stop_gateway(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()

    # ---------------------------------------------------------------- pre-flight
    def preflight(self, backend) -> None:
        """Before the baseline is spent, for a scaffold: its command exists inside the very
        sandbox it will get, and its driver gateway starts and answers. A `PreflightError`
        (one line, exit 2) otherwise."""
        if self.gateway is None:
            return
        agent_id = self.agent.get("id")
        command = check_command(self.agent)
        if command:
            self.report(f"pre-flight: looking for `{command}` inside the sandbox")
            found, detail = self.command_exists(backend, command)
            if not found:
                why = "is not installed where the agent runs" if not detail else \
                    f"was not found where the agent runs ({detail})"
                raise PreflightError(f"{agent_id}: `{command}` {why}. Install it: "
                                     f"{install_hint(self.agent)}")
        try:
            self.start_gateway()
        except Exception as exc:  # noqa: BLE001 - any failure to start is the pre-flight's
            last = self.gateway.last_log_line()
            raise PreflightError(f"{agent_id}: the driver gateway for {self.run.driver} did not "
                                 f"start: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                                 + (f" (log: {last})" if last else "")) from exc
        ok, message = self.gateway.probe()
        if not ok:
            last = self.gateway.last_log_line()
            raise PreflightError(f"{agent_id}: the driver gateway for {self.run.driver} does not "
                                 f"answer: {' '.join(str(message).split())[:300]}"
                                 + (f" (log: {last})" if last else ""))
        self.report(f"pre-flight: the driver gateway answers ({message})" if message
                    else "pre-flight: the driver gateway answers")

    def command_exists(self, backend, command: str) -> tuple[bool, str]:
        """`command -v COMMAND` in the agent's own sandbox (same binds, user and environment;
        no command hook, a log of its own, removed after)."""
        confined = backend.isolation in CONFINED
        spec = sandbox_spec(self.agent, self.run, self.paths, confined, {})
        log = self.paths.logs / "preflight.log"
        env = {k: v for k, v in spec.env.items() if k != "BASH_ENV"}
        # the grader's and the gateway's sockets do not exist yet: not bound for the check
        spec = dataclasses.replace(
            spec, command=["bash", "-c", check_script(self.agent, command)], log_path=log,
            command_log=None, env=env, marker=f"{self.run.sandbox_id}-preflight",
            socket_path=spec.socket_path if spec.socket_path.exists() else None,
            driver_socket=spec.driver_socket if spec.driver_socket and
            spec.driver_socket.exists() else None)
        try:
            proc = backend.start(spec)
            rc = proc.wait(PREFLIGHT_TIMEOUT_S)
            if rc is None:
                proc.stop(grace=1.0)
                return False, "the check timed out"
            if hasattr(proc, "close"):
                proc.close()
            output = log.read_text(encoding="utf-8", errors="replace").strip() \
                if log.is_file() else ""
        finally:
            log.unlink(missing_ok=True)
        if rc == 0:
            return True, ""
        first = output.splitlines()[0][:200] if output else ""
        return False, first

    def discard(self) -> None:
        """A fresh run whose pre-flight failed: stop what it started and remove its directory."""
        try:
            self.stop_gateway()
        except Exception:  # noqa: BLE001 - removing it anyway
            pass
        remove_run_dir(self.run_dir)

    def backend(self):
        from a2c.runtime.sandbox import get_backend
        if self.run.backend == "local":
            return get_backend("local", use_bwrap=(self.run.options or {}).get("use_bwrap"))
        return get_backend(self.run.backend)

    def start_env_services(self) -> None:
        """Start the task's declared services (e.g. the WebShop server) before any grading."""
        paths = RunPaths(self.run_dir)   # (tests drive this method with a bare namespace)
        task = TaskSpec.from_dict(read_manifest(paths.bundle, "Task").get("task") or {})
        specs = task.environment.services
        if specs and self.env_services is None:
            from a2c.runtime.env_services import describe, start_env_services
            self.report("starting services: " + ", ".join(describe(s) for s in specs))
            self.env_services = start_env_services(specs, log_dir=paths.logs)
            # the agent's own way in, limited to its training split (env_services/proxy.py)
            from a2c.runtime.env_services import agent_proxies
            self.env_proxies = agent_proxies(task, paths.train, paths.env_service_sockets,
                                             log_dir=paths.logs)
            for name in self.env_proxies:
                self.report(f"service {name}: the agent reaches it through a proxy limited "
                            "to its training split")

    def stop_env_services(self) -> None:
        for proxy in (getattr(self, "env_proxies", None) or {}).values():
            proxy.stop()
        self.env_proxies = {}
        if self.env_services is not None:
            self.env_services.stop()
            self.env_services = None

    def release_temp_socket_dirs(self) -> None:
        """After the services stopped: the short socket folders a long run path needed."""
        for folder in self.paths.temp_socket_dirs():
            shutil.rmtree(folder, ignore_errors=True)

    # ---------------------------------------------------------------- phases
    def baseline(self) -> None:
        if self.paths.baseline_result.is_file():
            self.run.baseline_score = baseline_score(self.run_dir)
            return
        from a2c.runtime.grader_service.baseline import compute_baseline_for_run
        from a2c.runtime.run.devices import grader_devices
        # announced only when it takes a while (an evaluation): a cache hit is one line, never
        # "scoring the base model" followed by "(cached)"
        lock, state = threading.Lock(), {"done": False}

        def announce() -> None:
            with lock:
                if not state["done"]:
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
                state["done"] = True
            timer.cancel()
        self.run.baseline_score = summary.get("score")
        if not summary.get("valid"):
            self.report(f"baseline evaluation FAILED (not scored as 0): {summary.get('error')}")
        elif summary.get("cached"):
            self.report(f"baseline score {summary['score']:.1f} (cached: scored by an earlier "
                        "run of this task, base model and grader)")
        else:
            self.report(f"baseline score {summary['score']:.1f} (scored in "
                        f"{float(summary.get('elapsed_s') or 0):.0f}s)")
        self.ctx.save()

    def launch_agent(self, backend):
        confined = backend.isolation in CONFINED
        return backend.start(sandbox_spec(self.agent, self.run, self.paths, confined,
                                          self.env_proxies))

    def supervise(self, proc, guard: BudgetGuard) -> dict:
        """Wait for the agent to exit or the deadline; stop the whole tree at the deadline.

        The deadline is kept by a watchdog thread (`DeadlineWatchdog`) that stops the tree at the
        deadline whatever this loop is doing; the periodic snapshot runs in its own thread, so no
        file operation on the agent's workspace can hold the loop or the kill."""
        last_snapshot = time.monotonic()
        last_meta = 0.0
        last_refresh = 0.0
        every = float((self.run.options or {}).get("snapshot_every_s") or SNAPSHOT_EVERY_S)
        meta_every = float((self.run.options or {}).get("meta_every_s") or 15)
        beat_every = float((self.run.options or {}).get("heartbeat_every_s")
                           or HEARTBEAT_EVERY_S)
        last_beat = time.monotonic()
        watchdog = DeadlineWatchdog(proc, guard.remaining(), STOP_GRACE_S)
        watchdog.start()
        reason = "exited"
        stop_report = None
        try:
            while True:
                rc = proc.poll()
                for type_, data in guard.tick():
                    if type_ == "budget_warning":
                        self.event(type_, data)
                        self.report(f"budget: {int(data['fraction'] * 100)}% used, "
                                    f"{format_duration(data['remaining_s'])} left")
                if rc is not None and not watchdog.fired.is_set():
                    break
                if watchdog.fired.is_set() or guard.deadline_hit:
                    watchdog.fire()           # (idempotent) the watchdog may be a tick late
                    self.event("deadline_reached", {"deadline": guard.deadline,
                                                    "wall_clock_s": guard.wall_clock_s})
                    self.report("deadline reached: stopping the agent's process tree")
                    stop_report = watchdog.wait_stopped()
                    reason = "deadline"
                    break
                now = time.monotonic()
                if now - last_meta >= meta_every:
                    last_meta = now
                    self._safely(update_run_meta, self.paths, self.run, guard.remaining())
                if now - last_refresh >= 2:
                    last_refresh = now
                    self.refresh()
                    if not self.service.alive():
                        self.report("the grader service died; restarting it on the same journal")
                        self.service.start()
                    if self.gateway is not None and not self.gateway.alive():
                        self.report("the driver gateway died; restarting it")
                        self._safely_start_gateway()
                if now - last_beat >= beat_every:
                    last_beat = now
                    self.heartbeat(guard)
                if now - last_snapshot >= every:
                    last_snapshot = now
                    self.snapshot_in_background("periodic")
                watchdog.fired.wait(0.25)
        finally:
            watchdog.cancel()
        stopped_for = getattr(proc, "stopped_for", None)   # "disk_budget": its watcher stopped it
        if stopped_for and reason == "exited":
            reason, stop_report = stopped_for, getattr(proc, "stop_report", None)
        if hasattr(proc, "close"):
            proc.close()
        cause = getattr(proc, "exit_cause", lambda: None)()   # memory, processes, disk, signal
        if reason == "deadline":
            cause = f"deadline: its wall clock ({format_duration(guard.wall_clock_s)}) ran out"
        return {"returncode": proc.returncode, "reason": reason, "stop": stop_report,
                "cause": cause}

    def heartbeat(self, guard: BudgetGuard) -> None:
        """The periodic progress line (`heartbeat_line`), from run.json's refreshed state; a
        failure to read it costs the line, never the run."""
        try:
            scored = len(journal_state(self.run_dir)["scored"])
            scores = {"submissions": self.run.get("submissions"), "scored": scored,
                      "best_score": self.run.get("best_score")}
            usage = None if self.gateway is None else \
                (usage_summary(self.run.get("driver_usage")) or {})
            elapsed = guard.wall_clock_s - guard.remaining()
            line = heartbeat_line(elapsed, guard.wall_clock_s, scores, usage)
        except (OSError, ValueError, TypeError, KeyError):
            return
        self.report(line)

    def _safely_start_gateway(self) -> None:
        try:
            self.gateway.start()
        except Exception as exc:  # noqa: BLE001 - the run goes on; the agent sees errors
            self.report(f"note: the driver gateway could not be restarted: {exc}")

    def _safely(self, fn, *args) -> None:
        try:
            fn(*args)
        except OSError as exc:   # the agent's workspace refused the write: the run goes on
            self.report(f"note: {getattr(fn, '__name__', fn)} failed: {exc}")

    def snapshot_in_background(self, reason: str) -> None:
        """One periodic snapshot at a time, in a thread: it never delays the loop or the kill."""
        thread = getattr(self, "_snapshot_thread", None)
        if thread is not None and thread.is_alive():
            self.report(f"snapshot ({reason}) skipped: the previous one is still running")
            return
        self._snapshot_thread = threading.Thread(target=self.snapshot, args=(reason,),
                                                 name="a2c-snapshot", daemon=True)
        self._snapshot_thread.start()

    def snapshot(self, reason: str) -> None:
        try:
            from a2c.contracts.outside import outside_roots
            from a2c.runtime.snapshots import Snapshotter
            info = Snapshotter(self.paths.snapshots, self.paths.workspace,
                               event_log=self.ctx.events,
                               outside=outside_roots(self.paths)).snapshot(reason)
            if info.get("skipped"):
                self.report(f"snapshot ({reason}) skipped: {info['skipped']}")
        except Exception as exc:  # noqa: BLE001 - a snapshot failure never stops a run
            self.report(f"snapshot ({reason}) failed: {exc}")

    def drain(self, timeout: float) -> None:
        """Let accepted submissions finish scoring (the deadline never cuts an evaluation)."""
        end = time.monotonic() + timeout
        announced = False
        while time.monotonic() < end:
            pending = journal_state(self.run_dir)["pending"]
            if not pending:
                return
            if not announced:
                self.report(f"waiting for {len(pending)} evaluation(s) to finish")
                announced = True
            if not self.service.alive():
                self.service.start()
            self.refresh()
            time.sleep(0.5)
        self.report("gave up waiting for pending evaluations: "
                    + ", ".join(journal_state(self.run_dir)["pending"]))

    def finish(self, status: RunStatus | None = None) -> dict:
        """Drain, stop the services, redact, score; `status` None: by `end_status`."""
        thread = getattr(self, "_snapshot_thread", None)
        if thread is not None:
            thread.join(timeout=120)
        self.snapshot("final")
        budget = self.run.budget_spec
        pending = journal_state(self.run_dir)["pending"]
        self.drain(float(budget.eval_timeout_s or 3600) * max(1, len(pending)) + 30)
        self.service.stop()
        self.stop_gateway()
        self.stop_env_services()
        self.release_temp_socket_dirs()
        self.score_final_split()
        self.redact_logs()
        transcript = copy_transcript(self.agent, self.paths, self.secrets)
        scores = self.refresh()
        if status is None:
            spent = bool((self.run.get("driver_usage") or {}).get("exhausted"))
            status = end_status(self.run.agent_exit, scores["submissions"], spent)
        self.run.update(status=status, ended_at=iso_utc(time.time()), transcript=transcript)
        if status != RunStatus.FINISHED:
            self.run.agent_log_tail = log_tail(self.paths.agent_log, self.secrets, TAIL_LINES)
        self.ctx.save()
        self.event("run_finished", {"baseline_score": self.run.baseline_score,
                                    "best_score": scores["best_score"],
                                    "final_score": scores["final_score"],
                                    "submissions": scores["submissions"],
                                    "valid_submissions": scores["valid_submissions"],
                                    "status": status.value,
                                    **{k: self.run.get(k) for k in FINAL_SPLIT_KEYS
                                       if k in self.run.to_dict()}})
        seal_record(self.ctx, status)
        return self.summary()

    def score_final_split(self) -> None:
        """With a final split: the counted submission and the base model scored once on the
        final items (runtime/grader_service/final.py), into run.json; a failure is reported and
        leaves the run's feedback scores as they are."""
        if not self.paths.final_heldout.is_file():
            return
        self.report("scoring the final split (items the agent never got feedback on)")
        from a2c.runtime.grader_service.final import score_final_split
        try:
            out = score_final_split(self.run_dir, (self.run.scoring or {}).get("policy", "best"))
        except Exception as exc:  # noqa: BLE001 - the run is still scored on feedback
            self.report(f"final split scoring FAILED: {exc}")
            out = {}
        self.run.update({k: (out or {}).get(k) for k in FINAL_SPLIT_KEYS})
        if out and out.get("final_split_score") is not None:
            gap = out.get("selection_gap")
            self.report(f"final split: {out['final_split_score']:.1f} (baseline "
                        f"{out['final_split_baseline']}); selection gap "
                        f"{'n/a' if gap is None else f'{gap:+.1f}'}")

    def redact_logs(self) -> None:
        """Secrets (passed keys, the grader token, the gateway key) out of logs/agent.log,
        logs/commands.log and the agent's folders the run keeps (runtime/redact.py); the values
        the snapshots used are removed with them."""
        for path in (self.paths.agent_log, self.paths.commands_log):
            try:
                if redact_file(path, self.secrets) > 0:
                    self.report(f"redacted passed secret values from {path.name}")
            except OSError as exc:
                self.report(f"note: could not redact {path.name}: {exc}")
        for folder in (self.paths.workspace, self.paths.agent_home,
                       getattr(self.paths, "agent_tmp", None)):
            if folder is not None and (found := redact_tree(folder, self.secrets))[0]:
                self.report(f"redacted secret values from {len(found[1])} file(s) of "
                            f"{folder.name}/: {', '.join(found[1][:5])}")
        remove_redact_file(self.paths.snapshots)

    def summary(self) -> dict:
        run = self.run.to_dict()     # plain JSON values (the status as its string)
        out = {**{k: run.get(k) for k in SUMMARY_KEYS}, "run_dir": str(self.run_dir)}
        out.update({k: run[k] for k in FINAL_SPLIT_KEYS if k in run})
        if self.gateway is not None:
            out["driver"] = self.run.driver
            out["driver_usage"] = usage_summary(self.run.get("driver_usage"))
        if self.run.get("agent_log_tail") is not None and out["status"] != RunStatus.FINISHED:
            out["agent_log_tail"] = self.run.get("agent_log_tail")
            # one line (the last thing the agent said), never raw stream-json
            out["reason"] = reason_line(log_tail(self.paths.agent_log, self.secrets, 200,
                                                 width=100_000)) \
                or reason_line(out["agent_log_tail"])
        return out

    def _guard(self) -> BudgetGuard:
        run = self.run
        if run.deadline is None:
            now = time.time()
            run.agent_started_at = iso_utc(now)
            run.deadline = now + float(run.budget_spec.wall_clock_s)
            run.task_format = task_format(grader_cfg(self.paths.bundle, {}))
        wall = float(run.budget_spec.wall_clock_s)
        guard = BudgetGuard(started_at=run.deadline - wall, wall_clock_s=wall)
        guard.warned = {t for t in guard.thresholds if guard.fraction_used() >= t}
        guard.deadline_hit = False
        return guard

    def _run_agent(self, backend, guard: BudgetGuard, resumed: bool) -> None:
        run = self.run
        self.event("agent_started", {"deadline": run.deadline, "wall_clock_s": guard.wall_clock_s,
                                     "isolation": backend.isolation, "resumed": resumed})
        self.report(f"launching agent {run.agent} ({backend.isolation} sandbox), "
                    f"budget {format_duration(guard.remaining())}")
        proc = self.launch_agent(backend)
        # what ran, seen from the host (runtime/process_record.py); its digest into the chain
        recorder = record_agent(self.paths, proc, backend, self.secrets,
                                (run.options or {}).get("process_interval_s"))
        try:
            if getattr(proc, "limits", None):   # the local backend's cgroup: what it enforces
                run["limits"] = proc.limits
                if proc.limits_warning:
                    self.report(proc.limits_warning)
            info = self.supervise(proc, guard)
        finally:
            self.event("process_record", recorder.stop())
        run.agent_exit = {k: info[k] for k in ("returncode", "reason")}
        data = {"returncode": info["returncode"], "reason": info["reason"]}
        if info.get("cause"):
            run.agent_exit["cause"] = data["cause"] = info["cause"]
        self.ctx.save()
        if info.get("stop"):
            data["stop"] = {k: info["stop"].get(k) for k in ("terminated", "killed",
                                                             "elapsed_s", "survivors")}
        self.event("agent_exited", data)
        self.report(f"agent exited ({info['reason']}, rc {info['returncode']}"
                    + (f"; {info['cause']})" if info.get("cause") else ")"))

    def go(self, resumed: bool = False) -> dict:
        from a2c.runtime.run.devices import held
        with held(self.run_dir, self.run):   # the run's GPUs locked until it ends
            return self._go(resumed)

    def _go(self, resumed: bool) -> dict:
        run = self.run
        try:
            backend = self.backend()
            run.isolation = backend.isolation
            warning = getattr(backend, "warning", lambda: None)()
            if warning:
                self.report(warning)
            if hasattr(backend, "prepare_image"):   # docker: built or reused before any budget
                backend.report = self.report
                backend.prepare_image(self.paths.bundle, self.paths.agent)
            if self.fresh:
                self.preflight(backend)     # before anything is spent; nothing left if it fails
            elif self.gateway is not None:
                self.start_gateway()
            if not resumed:
                run.status = RunStatus.RUNNING
                run.started_at = iso_utc(time.time())
                self.ctx.save()
                self.event("run_started", {k: run.get(k) for k in STARTED_KEYS})
            self.start_env_services()
            self.baseline()
            guard = self._guard()
            agent_out = "/workspace/output" if backend.isolation in CONFINED \
                else str(self.paths.output)
            update_service_config(self.run_dir, deadline_unix=run.deadline,
                                  agent_output_dir=agent_out)
            self._safely(update_run_meta, self.paths, run, guard.remaining())
            if self.secrets:   # read by every snapshot, the grader service's too, until finish
                write_redact_file(self.paths.snapshots, self.secrets)
            self.ctx.save()
            self.report("starting the grader service")
            self.service.start()
            self.refresh()
            if run.agent_exit is None and guard.remaining() > 1:
                self._run_agent(backend, guard, resumed)
            elif run.agent_exit is None:
                self.event("deadline_reached", {"deadline": run.deadline,
                                                "wall_clock_s": guard.wall_clock_s,
                                                "note": "no budget left at resume"})
                run.agent_exit = {"returncode": None, "reason": "no budget left at resume"}
                self.event("agent_exited", run.agent_exit)
            return self.finish()
        except PreflightError:
            if self.fresh:
                self.discard()
            else:
                self._abort(RunStatus.FAILED)
            raise
        except KeyboardInterrupt:
            self._abort(RunStatus.INTERRUPTED)
            raise
        except A2CError:
            self._abort(RunStatus.FAILED)
            raise
        except Exception:
            self._abort(RunStatus.FAILED)
            raise

    def _abort(self, status: RunStatus) -> None:
        try:
            from a2c.runtime.sandbox.proctree import kill_tree
            kill_tree(None, None, self.run.sandbox_id, grace=2.0)
            self.service.stop()
            self.stop_gateway()
            self.stop_env_services()
            self.release_temp_socket_dirs()
            self.redact_logs()
            self.refresh_driver()
            self.run.update(status=status, ended_at=iso_utc(time.time()))
            self.ctx.save()
            seal_record(self.ctx, status)
        except Exception:  # noqa: BLE001 - best effort while failing
            pass


def execute(ctx: RunContext, report: Reporter = print) -> dict:
    runner = Runner(ctx, report)
    runner.fresh = True
    return runner.go(resumed=False)
