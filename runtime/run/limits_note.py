"""The limits that hold for this run, told to the agent in MODE.md when the run starts.

INSTRUCTIONS.md is compiled once, with the task's budget; a run may hold other limits (`a2c run
--budget`, a suite's budget, the driver budgets of `--driver-tokens`, the disk budget the runtime
applies when the task sets none), all of them in the run's `Budget` (a2c/contracts/budget.py). An agent that plans against the compiled figures plans
against limits that do not hold (a demo run of 2m30s read "15m" there), so the runtime renders
the run's own, from the budget it enforces, into the file that is written per run anyway.
"""

from __future__ import annotations

import jinja2

from a2c.contracts.budget import Budget
from a2c.durations import format_duration
from a2c.runtime.sandbox.disk import format_size

TEMPLATE = """
## This run's limits

These are the limits this run enforces; where they differ from the task's in INSTRUCTIONS.md,
these hold.

| Resource | Limit |
|---|---|
| Wall clock | {{ b.wall_clock_s | duration }} ({{ b.wall_clock_s | round | int }} s) from the start of the run |
| Submissions | at most {{ b.max_submissions }} |
| Minimum interval between submissions | {{ b.min_interval_s | duration }} |
| Evaluation time per submission | at most {{ b.eval_timeout_s | duration }} |
| Disk (workspace, /tmp and home together) | {{ disk }}{% if not b.disk_mb %} (the default){% endif %} |
{% if b.memory_mb %}| Memory | {{ memory }} |
{% endif %}{% if b.cpus %}| CPUs | {{ b.cpus }} |
{% endif %}{% if b.pids %}| Processes | at most {{ b.pids }} |
{% endif %}{% if b.driver_tokens %}| Driver model tokens | {{ b.driver_tokens }} |
{% endif %}{% if b.driver_cost_usd %}| Driver model cost | {{ b.driver_cost_usd }} USD |
{% endif %}{% if b.driver_calls %}| Driver model calls | {{ b.driver_calls }} |
{% endif %}
Past the disk budget or the memory limit your processes are stopped and the run ends.
"""


def limits_section(b: Budget) -> str:
    """MODE.md's section on the run's limits, from the budget the runtime enforces."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["duration"] = format_duration
    return env.from_string(TEMPLATE).render(
        b=b, disk=format_size(b.disk_budget_mb * 1024 * 1024),
        memory=format_size(int(b.memory_mb) * 1024 * 1024) if b.memory_mb else None)
