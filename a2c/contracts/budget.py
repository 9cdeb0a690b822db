"""`Budget`: every limit one run holds, in one frozen record, and the one place enforcing each.

A run's limits come from three sources (the task's resolved `budget`, the run's overrides:
`a2c run --budget` and `--driver-*`, and the defaults the runtime applies when a task sets
none) and were read as dict keys in seven places, each with a fallback of its own; the wall
clock fell back to 12 h in one and to 1 h in another. The run decides its `Budget` once, when it
is prepared (`Budget.for_run`), records it in run.json (`RunInfo.budget`) and every enforcer
reads its attributes. A field's default is the spec's (`a2c.contracts.spec.BudgetSpec`), taken
from there, never written again here.

`Budget.ENFORCED_BY` names, per limit, the `path:symbol` that enforces it (tests keep each one
resolvable and listed in docs/architecture.md, "Where does X live").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from a2c.durations import parse_duration

from .spec import BudgetSpec

_SPEC = BudgetSpec()          # the defaults, declared once (with their docs) in the spec
DRIVER_LIMITS = ("driver_tokens", "driver_cost_usd", "driver_calls")


@dataclass(frozen=True)
class Budget:
    """What the agent of one run may spend (None: unlimited, or for `disk_mb` the default)."""

    wall_clock_s: float = _SPEC.wall_clock_s
    gpus: int = _SPEC.gpus
    max_submissions: int = _SPEC.max_submissions
    min_interval_s: float = _SPEC.min_interval_s
    eval_timeout_s: float = _SPEC.eval_timeout_s
    driver_tokens: int | None = _SPEC.driver_tokens
    driver_cost_usd: float | None = _SPEC.driver_cost_usd
    driver_calls: int | None = _SPEC.driver_calls
    memory_mb: int | None = _SPEC.memory_mb
    cpus: float | None = _SPEC.cpus
    pids: int | None = _SPEC.pids
    disk_mb: int | None = _SPEC.disk_mb

    # limit -> the one `path:symbol` (repository-relative) that enforces it
    ENFORCED_BY: ClassVar[dict[str, str]] = {
        "wall_clock_s": "runtime/run/watchdog.py:DeadlineWatchdog",
        "gpus": "runtime/run/devices.py:assign",
        "max_submissions": "runtime/grader_service/limits.py:check_limits",
        "min_interval_s": "runtime/grader_service/limits.py:check_limits",
        "eval_timeout_s": "runtime/grader_service/evaluator.py:run_evaluation",
        "driver_tokens": "runtime/driver_gateway/ledger.py:Ledger.admit",
        "driver_cost_usd": "runtime/driver_gateway/ledger.py:Ledger.admit",
        "driver_calls": "runtime/driver_gateway/ledger.py:Ledger.admit",
        "memory_mb": "runtime/sandbox/cgroups.py:AgentCgroup.create",
        "cpus": "runtime/sandbox/cgroups.py:AgentCgroup.create",
        "pids": "runtime/sandbox/cgroups.py:AgentCgroup.create",
        "disk_mb": "runtime/sandbox/disk.py:DiskWatcher",
    }

    # ------------------------------------------------------------------ derived
    @property
    def disk_budget_mb(self) -> int:
        """The disk budget that holds: the task's, else the spec's default (DEFAULT_DISK_MB)."""
        return BudgetSpec(disk_mb=self.disk_mb).disk_budget_mb

    @property
    def driver_limited(self) -> bool:
        """Whether any driver limit is set (the gateway then meters every call)."""
        return any(getattr(self, name) is not None for name in DRIVER_LIMITS)

    def driver_limits(self) -> dict[str, int | float | None]:
        """The driver limits by name, every one present (None: unlimited): gateway.json's
        `budget`, the wire format the gateway reads."""
        return {name: getattr(self, name) for name in DRIVER_LIMITS}

    # ------------------------------------------------------------------ making one
    @classmethod
    def for_run(cls, task_budget: dict[str, Any] | BudgetSpec | None,
                wall_clock: str | float | None = None, **driver: int | float | None) -> Budget:
        """The run's budget: the task's (as resolved), `wall_clock` (`--budget`, a duration)
        and each driver limit (`--driver-tokens` ...: driver_tokens=, driver_cost_usd=,
        driver_calls=) overriding it where given (None keeps the task's)."""
        if isinstance(task_budget, BudgetSpec):
            task_budget = task_budget.to_dict()
        budget = cls.from_dict(task_budget or {})
        unknown = set(driver) - set(DRIVER_LIMITS)
        if unknown:
            raise TypeError(f"not a driver limit: {', '.join(sorted(unknown))}")
        changes: dict[str, Any] = {k: v for k, v in driver.items() if v is not None}
        if wall_clock is not None:
            changes["wall_clock_s"] = parse_duration(wall_clock)
        # read back as run.json will be (each field its kind: `--budget 90s` is 90.0, as a
        # resume reads it; an int here would make run.json differ from run_started's copy)
        return cls.from_dict(dataclasses.replace(budget, **changes).to_dict())

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Budget:
        """run.json's (or a task's) `budget`; a key this a2c does not know is ignored, one
        missing (or null, as older runs wrote an unset wall clock) takes its default."""
        kinds = {"wall_clock_s": float, "min_interval_s": float, "eval_timeout_s": float,
                 "gpus": int, "max_submissions": int, "driver_cost_usd": float,
                 "driver_tokens": int, "driver_calls": int, "memory_mb": int, "cpus": float,
                 "pids": int, "disk_mb": int}
        values = {}
        for f in fields(cls):
            value = data.get(f.name)
            if value is None and f.default is not None:
                continue
            values[f.name] = None if value is None else kinds[f.name](value)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The limits that are set (an unset optional one is left out, as the compiler does)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}
