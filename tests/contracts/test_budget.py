"""The run's `Budget`: every limit in one frozen record, each default the spec's (declared
once), the run's overrides applied once when it is prepared."""

from __future__ import annotations

import dataclasses

import pytest

from a2c.contracts.budget import Budget
from a2c.contracts.spec import DEFAULT_DISK_MB, BudgetSpec


def test_each_default_is_the_specs():
    spec, budget = BudgetSpec(), Budget()
    for f in dataclasses.fields(Budget):
        assert getattr(budget, f.name) == getattr(spec, f.name), f.name
    assert budget.wall_clock_s == 12 * 3600 and budget.disk_budget_mb == DEFAULT_DISK_MB
    with pytest.raises(dataclasses.FrozenInstanceError):
        budget.wall_clock_s = 1


def test_for_run_applies_the_runs_overrides_over_the_tasks():
    task = {"wall_clock_s": 600, "max_submissions": 5, "driver_tokens": 1000, "disk_mb": 50,
            "someday": True}
    budget = Budget.for_run(task, wall_clock="90s", driver_calls=3, driver_tokens=None)
    assert budget.wall_clock_s == 90 and budget.max_submissions == 5
    assert budget.driver_limits() == {"driver_tokens": 1000, "driver_cost_usd": None,
                                      "driver_calls": 3}
    assert budget.driver_limited and budget.disk_budget_mb == 50
    assert Budget.for_run(task).wall_clock_s == 600
    assert Budget.for_run(BudgetSpec.from_dict(task)) == Budget.for_run(task)
    with pytest.raises(TypeError, match="driver_cost"):
        Budget.for_run(task, driver_cost=1.0)


def test_the_json_holds_the_limits_that_are_set():
    budget = Budget.from_dict({"wall_clock_s": "60", "memory_mb": 2048.0, "cpus": None})
    assert budget.wall_clock_s == 60.0 and budget.memory_mb == 2048 and budget.cpus is None
    assert not budget.driver_limited
    assert budget.to_dict() == {"wall_clock_s": 60.0, "gpus": 1, "max_submissions": 30,
                                "min_interval_s": 0, "eval_timeout_s": 3600, "memory_mb": 2048}
    assert Budget.from_dict(budget.to_dict()) == budget


def test_a_run_s_budget_reads_back_as_its_record_wrote_it():
    """run.json's budget is written at prepare and read back at every resume: the two must be
    the same JSON, or the record stops verifying against run_started's copy (a `--budget 90s`
    decided as the int 90 came back 90.0 after a killed sweep trial resumed)."""
    from a2c.canonical import canonical_json
    from a2c.contracts.budget import Budget
    for wall in ("90s", 90, 90.0, "1h30m", None):
        budget = Budget.for_run({"wall_clock_s": 600, "gpus": 0, "max_submissions": 10},
                                wall, driver_tokens=5000, driver_calls=None)
        written = budget.to_dict()
        assert canonical_json(Budget.from_dict(written).to_dict()) == canonical_json(written)
        assert isinstance(written["wall_clock_s"], float) and written["driver_tokens"] == 5000
