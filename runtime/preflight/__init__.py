"""What this machine can do for a2c: one small check per capability, each a `Check` row with the
command that fixes it. `a2c doctor` prints them all; `a2c run` and `a2c sweep` run the ones they
need before anything is written (`run_checks`, `sweep_checks`), so a missing piece is one line
with its fix instead of a failure halfway.

Each row is `required` (the demo's path: bubblewrap, the training stack, the built-in
SmolLM2 prepared or preparable, the record key, disk space, cores and memory) or optional
(GPUs, docker, node, the LLM scaffolds, Ray, ...): `a2c doctor` exits 1 when a required row is
`missing`, 3 when only optional rows are not ok, 0 when nothing is (verdict.py).

Each check only looks (no install, no key made, no model built); the probes that start
something (bubblewrap, a cgroup, the Docker engine) start the least that answers and remove it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from a2c.contracts.spec import AgentSpec

from .demo import (
    GB,
    disk_check,
    model_checks,
    python_check,
    record_key_check,
    resources_check,
)
from .isolation import bubblewrap_checks, cgroup_check, docker_checks, gpu_check
from .optional import environment_check, node_check, ray_check, scaffold_checks
from .row import MISSING, OK, STATUSES, WARN, Check
from .verdict import Verdict

__all__ = ["GB", "MISSING", "OK", "STATUSES", "WARN", "Check", "all_checks", "bubblewrap_checks",
           "cgroup_check", "disk_check", "docker_checks", "environment_check", "gpu_check",
           "model_checks", "node_check", "python_check", "ray_check", "record_key_check",
           "resources_check", "run_checks", "scaffold_checks", "sweep_checks", "Verdict"]


def all_checks(agents: Iterable[AgentSpec] = (), search_path: str | None = None,
               runs_dir: Path | None = None) -> list[Check]:
    """Every row of `a2c doctor`: the required ones first, then the optional ones."""
    rows = [python_check(), *bubblewrap_checks(), resources_check(), disk_check(runs_dir),
            *model_checks(), record_key_check(), cgroup_check(), gpu_check(), *docker_checks(),
            node_check(), *scaffold_checks(agents, search_path), ray_check(),
            environment_check()]
    return sorted(rows, key=lambda row: not row.required)


def run_checks(backend: str, use_bwrap: bool | None = None) -> list[Check]:
    """`a2c run`'s pre-flight: the sandbox it will use and whether the limits hold."""
    if backend == "docker":
        return [*docker_checks()[:1], environment_check()]
    checks = [] if use_bwrap is False else bubblewrap_checks()[:1]
    return [*checks, cgroup_check(), environment_check()]


def sweep_checks() -> list[Check]:
    """`a2c sweep`'s pre-flight: Ray (each trial's `a2c run` checks its own sandbox)."""
    return [ray_check(), environment_check()]
