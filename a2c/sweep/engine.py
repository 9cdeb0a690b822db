"""The Ray side of a sweep: connect, one placement group per trial, at most N in flight.

Each trial is one Ray task that runs `python -m a2c.cli run ...` (or `run --resume`) in a
subprocess on the node Ray picked, inside the first bundle of the trial's placement group (the
agent's CPUs and GPUs): the GPU ids Ray assigned to the task (`ray.get_gpu_ids()`) reach the
agent's sandbox as `--gpus` (`none` for a CPU trial). The second bundle is the grader's
evaluation device: reserved for the trial (no other task can take it), its GPU ids learnt from a
small actor placed in it and handed to the run as `--grader-gpus`, so evaluations run there and
never on the agent's devices. A resumed trial gets its new placement's ids the same way. Both
bundles are STRICT_PACK: a run is one process tree on one machine. Ray does the queueing and the placement; this module only keeps
`max_concurrent` trials submitted and reads each run directory when its task returns.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.sweep_file import FAILED
from a2c.errors import A2CError

from .plan import Node, TrialPlan
from .state import DONE, FRESH, RESUME, TrialOutcome, Verifier, move_aside, outcome, read_state

INSTALL_HINT = "a2c sweep runs on Ray, which is not installed: pip install 'a2c[sweep]'"
LOG_DIR = ".sweep"


def import_ray():
    try:
        import ray
    except ImportError:
        raise A2CError(INSTALL_HINT) from None
    return ray


def connect(address: str | None, num_cpus: float | None = None,
            num_gpus: int | None = None) -> Any:
    """A local Ray instance on loopback (the default), or the cluster at `address`.

    The local instance listens on 127.0.0.1 only (tests/sweep/test_ray_loopback.py reads what
    its processes listen on). `_node_ip_address="127.0.0.1"` alone does not do it: Ray turns a
    loopback address into the machine's reachable one and its GCS, raylet and workers listen on
    every interface. Ray's local-only mode (the one it uses on macOS and Windows,
    `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`) keeps the loopback address; Ray reads it when imported
    (set first, and its processes inherit it) and checks it when it picks the address (set on
    the imported constant too, for a Ray imported before this call)."""
    if not address:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray = import_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return ray
    if not address:
        try:
            from ray._private import ray_constants
            ray_constants.ENABLE_RAY_CLUSTER = False
        except ImportError:   # pragma: no cover - another Ray layout: the variable alone
            pass
    kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING",
                              "log_to_driver": False}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus if num_cpus is not None else os.cpu_count(),
                 num_gpus=num_gpus, _node_ip_address="127.0.0.1", **kwargs)
    return ray


def cluster_nodes(ray) -> list[Node]:
    """The live nodes of the cluster (`ray.nodes()`, Ray's own wire: parsed here)."""
    return [Node(n.get("NodeManagerAddress", "?"), dict(n.get("Resources") or {}))
            for n in ray.nodes() if n.get("Alive")]


def _trial_task(ray):
    """The remote function (defined once Ray is imported): run `a2c` with `argv`, output to
    `log_path`; return its exit code and timings."""
    @ray.remote(max_retries=0)
    def run_a2c(argv: list[str], log_path: str, eval_devices: list | None,
                cwd: str | None = None, command: list[str] | None = None) -> dict:
        import subprocess
        env = dict(os.environ)
        argv = [*argv, *device_flags(ray.get_gpu_ids(), eval_devices)]
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        start = time.time()
        with open(log_path, "ab") as log:
            # `a2c` of the worker's own interpreter (a test hands in a stand-in `command`)
            proc = subprocess.run([*(command or [sys.executable, "-m", "a2c.cli"]), *argv],
                                  stdout=log,
                                  stderr=subprocess.STDOUT, env=env, check=False,
                                  cwd=cwd if cwd and os.path.isdir(cwd) else None)
        return TaskExit(proc.returncode, start, time.time())
    return run_a2c


@dataclass(frozen=True)
class TaskExit:
    """What a trial's Ray task returns: `a2c run`'s exit code and when it ran."""

    returncode: int | None = None
    started: float = 0.0
    ended: float = 0.0


def device_flags(agent_ids: list, grader_ids: list | None) -> list[str]:
    """`--gpus` and `--grader-gpus` for the ids Ray assigned (`none` where it assigned none)."""
    def ids(values) -> str:
        return ",".join(str(v) for v in values) or "none"
    return ["--gpus", ids(agent_ids), "--grader-gpus", ids(grader_ids or [])]


def _grader_device(ray):
    @ray.remote(num_cpus=0)
    class GraderDevice:
        """Sits in the grader's bundle for the trial's life; says which GPUs that bundle holds."""

        def gpu_ids(self) -> list:
            return list(ray.get_gpu_ids())
    return GraderDevice


@dataclass
class Flight:
    plan: TrialPlan
    action: str
    attempt: int
    started: float
    pg: Any
    holder: Any = None


@dataclass
class SweepResult:
    outcomes: dict[str, TrialOutcome] = field(default_factory=dict)   # trial id -> outcome
    ran: list[str] = field(default_factory=list)              # ids a Ray task ran for


class SweepEvents:
    """What the sweep says as it goes (a2c/sweep/progress.py records and prints it); this base
    says nothing (a caller that only wants the result)."""

    def queued(self, plan: TrialPlan, action: str, why: str | None = None) -> None:
        """Waiting for Ray: a fresh run or a resume (`why`: what ended the last attempt)."""

    def running(self, plan: TrialPlan, action: str, attempt: int, log: Path) -> None:
        """Submitted to Ray: `a2c run` (or `run --resume`) of `attempt` (0 first), its output
        in `log`."""

    def ended(self, plan: TrialPlan, out: TrialOutcome) -> None:
        """Done: finished, failed, or skipped (an earlier sweep ran it)."""

    def tick(self) -> None:
        """A poll of Ray went by (a live table refreshes its clock)."""


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip()[:160] for line in text[-lines:])


@dataclass
class _Sweep:
    """What one sweep's loop carries between its steps: the queue, the trials in flight, the
    resumes spent, and Ray's pieces (the trial task, the grader-device holder)."""

    ray: Any
    runs_dir: Path
    verify: Verifier
    events: SweepEvents
    no_bwrap: bool
    command: list[str] | None
    result: SweepResult
    run_a2c: Any = None
    holder_cls: Any = None
    max_resumes: int = 1
    queue: list[tuple[TrialPlan, str, int]] = field(default_factory=list)
    flights: dict[Any, Flight] = field(default_factory=dict)
    resumes: dict[str, int] = field(default_factory=dict)

    def log(self, plan: TrialPlan, attempt: int) -> Path:
        return self.runs_dir / LOG_DIR / "logs" / f"{plan.id}.{attempt}.log"

    def submit(self, plan: TrialPlan, action: str, attempt: int) -> None:
        """The trial's placement group (the agent's bundle, the grader's), then its task."""
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        if action == FRESH:
            move_aside(plan.run_dir)
            argv = plan.run_argv(no_bwrap=self.no_bwrap)
        else:
            argv = plan.resume_argv()
        agent = plan.trial.agent_resources or {"CPU": 1.0}
        grader = plan.trial.grader_resources
        bundles = [agent] + ([grader] if grader else [])
        pg = placement_group(bundles, strategy="STRICT_PACK", name=f"a2c-{plan.id}"[:60])
        holder, devices = None, None
        if grader.get("GPU"):
            holder = self.holder_cls.options(
                num_gpus=grader["GPU"], scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=1)).remote()
            devices = holder.gpu_ids.remote()
        log = self.log(plan, attempt)
        ref = self.run_a2c.options(
            num_cpus=agent.get("CPU", 0), num_gpus=agent.get("GPU", 0),
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=0)).remote(argv, str(log), devices,
                                                            os.getcwd(), self.command)
        self.flights[ref] = Flight(plan, action, attempt, time.time(), pg, holder)
        self.result.ran.append(plan.id)
        self.events.running(plan, action, attempt, log)

    def settle(self, ref: Any) -> None:
        """A trial's task returned: its outcome, or a resume queued when the run did not end."""
        from ray.util.placement_group import remove_placement_group
        ray = self.ray
        flight = self.flights.pop(ref)
        plan = flight.plan
        crash = None
        info = TaskExit()
        try:
            info = ray.get(ref)
        except ray.exceptions.RayError as exc:       # node lost, worker killed, ...
            crash = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        finally:
            if flight.holder is not None:
                ray.kill(flight.holder)
            remove_placement_group(flight.pg)
        state = read_state(plan.run_dir)
        if state.action == DONE:
            out = outcome(plan.run_dir, self.verify)
        elif state.action == RESUME and self.resumes.get(plan.id, 0) < self.max_resumes:
            self.resumes[plan.id] = self.resumes.get(plan.id, 0) + 1
            self.queue.append((plan, RESUME, flight.attempt + 1))
            self.events.queued(plan, RESUME, crash or f"a2c run exited {info.returncode}")
            return
        else:
            why = crash or (f"a2c run exited {info.returncode} "
                            f"({'no run record' if state.action == FRESH else 'run not ended'})")
            tail = _log_tail(self.log(plan, flight.attempt))
            out = TrialOutcome(FAILED, why + (f": {tail}" if tail else ""),
                               run_status=None if state.run_status is None
                               else str(state.run_status))
        out.seconds = round(time.time() - flight.started, 1)
        out.attempts = flight.attempt + 1
        self.result.outcomes[plan.id] = out
        self.events.ended(plan, out)


def run_sweep(connect_ray: Callable[[], Any], plans: list[TrialPlan], runs_dir: Path,
              verify: Verifier, events: SweepEvents, max_concurrent: int = 1, max_resumes: int = 1,
              no_bwrap: bool = False, poll_s: float = 1.0,
              command: list[str] | None = None) -> SweepResult:
    """Run every trial that is not done; return each trial's outcome (done ones included).
    Ray is started (`connect_ray()`) only if some trial has work left: a sweep run a second time
    reads its run directories and does nothing else."""
    result = SweepResult()
    queue: list[tuple[TrialPlan, str, int]] = []
    for plan in plans:
        state = read_state(plan.run_dir)
        if state.action == DONE:
            out = outcome(plan.run_dir, verify)
            out.skipped = True
            result.outcomes[plan.id] = out
            events.ended(plan, out)
        else:
            queue.append((plan, state.action, 0))
            events.queued(plan, state.action)
    if not queue:
        return result
    ray = connect_ray()
    sweep = _Sweep(ray, runs_dir, verify, events, no_bwrap, command, result,
                   run_a2c=_trial_task(ray), holder_cls=_grader_device(ray), queue=queue,
                   max_resumes=max_resumes)
    while sweep.queue or sweep.flights:
        while sweep.queue and len(sweep.flights) < max_concurrent:
            sweep.submit(*sweep.queue.pop(0))
        ready, _ = ray.wait(list(sweep.flights), num_returns=1, timeout=poll_s)
        events.tick()
        for ref in ready:
            sweep.settle(ref)
    return result
