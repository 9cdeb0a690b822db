"""What each trial of a suite bundle runs, where its record goes, and what it asks Ray for.

A trial's run directory is `RUNS_DIR/<trial id>` (`a2c run --run-id`), so the id derived from the
trial's content is also where a second `a2c sweep` looks for the first one's record.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from a2c.contracts.spec import SuiteSpec
from a2c.contracts.trial import Trial
from a2c.errors import A2CError

SHARED_SERVERS = ".sweep/driver-servers"   # under the runs folder: vllm/ driver servers the
                                           # trials of one node share (runtime/run/driver_share.py)


@dataclass
class TrialPlan:
    trial: Trial
    run_dir: Path
    task_bundle: Path
    agent_bundle: Path

    @property
    def id(self) -> str:
        return self.trial.id

    def run_argv(self, no_bwrap: bool = False) -> list[str]:
        """`a2c run` arguments (after `a2c`) for a fresh run of this trial."""
        t = self.trial
        argv = ["run", str(self.task_bundle), "--agent", str(self.agent_bundle),
                "--mode", t.mode, "--seed", str(t.seed), "--runs-dir", str(self.run_dir.parent),
                "--run-id", t.id]
        if t.driver:
            argv += ["--driver", t.driver]
            if t.driver.startswith("vllm/"):   # one server per node for the trials that can share it
                argv += ["--share-driver-server", str(self.run_dir.parent / SHARED_SERVERS)]
        over = t.given
        budget = over.budget
        if budget.wall_clock_s is not None:
            argv += ["--budget", f"{budget.wall_clock_s:g}s"]
        for value, flag in ((budget.driver_tokens, "--driver-tokens"),
                            (budget.driver_cost_usd, "--driver-cost"),
                            (budget.driver_calls, "--driver-calls")):
            if value is not None:
                argv += [flag, f"{value:g}"]
        if over.base_model:
            argv += ["--model", str(over.base_model)]
        if over.backend:
            argv += ["--backend", str(over.backend)]
        for name, value in sorted(over.agent_params.items()):
            text = json.dumps(value) if isinstance(value, bool) else str(value)
            argv += ["--agent-param", f"{name}={text}"]
        if no_bwrap:
            argv.append("--no-bwrap")
        return argv

    def resume_argv(self) -> list[str]:
        return ["run", "--resume", str(self.run_dir)]


def suite_trials(suite: SuiteSpec) -> list[Trial]:
    """The suite bundle's trials (`suite.json`'s `suite.trials`), typed, in suite order."""
    return [Trial.from_dict(raw) for raw in suite.trials or []]


def plan_trials(suite: SuiteSpec, runs_dir: Path, task_bundles: dict[str, Path],
                agent_bundles: dict[str, Path]) -> list[TrialPlan]:
    """The suite bundle's body (`suite.json`'s `suite`) → one plan per trial, in suite order."""
    return [TrialPlan(trial, (runs_dir / trial.id).resolve(), task_bundles[trial.task],
                      agent_bundles[trial.agent]) for trial in suite_trials(suite)]


# ------------------------------------------------------------------------- cluster shapes

@dataclass(frozen=True)
class Node:
    name: str
    resources: dict[str, float]      # {"CPU": 64, "GPU": 8, ...}


_SHAPE = re.compile(r"^(\d+)x(\d+(?:\.\d+)?)x(\d+)$")


def assumed_cluster(shape: str) -> list[Node]:
    """`4x64x8` → four nodes of 64 CPUs and 8 GPUs each (`--assume-cluster`, for planning a
    cluster one does not have at hand)."""
    m = _SHAPE.match(shape.strip())
    if not m:
        raise A2CError(f"--assume-cluster {shape!r}: write NODESxCPUSxGPUS, e.g. 4x64x8")
    n, cpus, gpus = int(m[1]), float(m[2]), int(m[3])
    return [Node(f"node-{i}", {"CPU": cpus, "GPU": float(gpus)}) for i in range(n)]


def local_node(num_cpus: float | None, num_gpus: int | None) -> Node:
    """This machine as a local Ray instance would see it: `--num-cpus`/`--num-gpus`, else its
    CPUs and the GPUs CUDA_VISIBLE_DEVICES names (else /proc/driver/nvidia's)."""
    gpus = num_gpus if num_gpus is not None else _local_gpus()
    return Node("local", {"CPU": float(num_cpus or os.cpu_count() or 1), "GPU": float(gpus)})


def _local_gpus() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    gpus = Path("/proc/driver/nvidia/gpus")
    return len(list(gpus.iterdir())) if gpus.is_dir() else 0


def demand(trial: Trial) -> dict[str, float]:
    """What the trial's placement group holds on one node (agent + grader bundles)."""
    total: dict[str, float] = {}
    for bundle in (trial.resources or {}).values():
        for k, v in bundle.items():
            total[k] = total.get(k, 0.0) + float(v)
    return total


def fits(trial: Trial, node: Node) -> bool:
    """Both bundles on one node (STRICT_PACK: the run is one process tree on one machine)."""
    return all(node.resources.get(k, 0.0) >= v for k, v in demand(trial).items())


def unfit(plans: list[TrialPlan], nodes: list[Node]) -> list[TrialPlan]:
    """Trials no node of the cluster could ever fit (they would wait for ever)."""
    return [p for p in plans if not any(fits(p.trial, n) for n in nodes)]


def concurrency(plans: list[TrialPlan], nodes: list[Node]) -> int:
    """How many of the (first, largest-shape) trials fit side by side, packing node by node: the
    width of the sweep on this cluster, for the plan's time estimate."""
    if not plans or not nodes:
        return 0
    need = max((demand(p.trial) for p in plans), key=lambda d: (d.get("GPU", 0), d.get("CPU", 0)))
    width = 0
    for node in nodes:
        counts = [int(node.resources.get(k, 0.0) // v) for k, v in need.items() if v > 0]
        width += min(counts) if counts else 0
    return width


@dataclass(frozen=True)
class PlanEstimate:
    """What `--dry-run` prints under the trial list: the trials, how many run side by side
    (`width`), their trial-hours and GPU-hours, and a lower bound on the wall time (`waves` of
    `width` trials of the longest wall clock)."""

    trials: int
    width: int
    trial_hours: float
    gpu_hours: float
    waves: int
    wall_hours: float


def estimate_hours(plans: list[TrialPlan], nodes: list[Node]) -> PlanEstimate | None:
    """The plan's estimate on `nodes` (None when no trial fits side by side: width 0)."""
    width = concurrency(plans, nodes)
    if not width:
        return None
    hours = [(p.trial.wall_clock_s or 0) / 3600 for p in plans]
    gpu_hours = sum(h * demand(p.trial).get("GPU", 0.0) for h, p in zip(hours, plans))
    waves = -(-len(plans) // width)
    return PlanEstimate(trials=len(plans), width=width, trial_hours=sum(hours),
                        gpu_hours=gpu_hours, waves=waves, wall_hours=waves * max(hours))
