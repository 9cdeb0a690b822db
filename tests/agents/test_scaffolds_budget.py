"""Each real agent CLI against a spent driver budget: the gateway answers the scaffold in its own
wire's out-of-credit error, records `driver_budget_exhausted`, and the run still ends scored
(the baseline) with a status that says what the agent did. Slow (no training: each scaffold
stops at its first refused call; the wall clock caps the ones that keep retrying)."""

from __future__ import annotations

import json

import pytest
from scaffold_runs import SCAFFOLDS, agent_spec, needs, skip_unless_installed

from a2c.contracts.events import read_events

BUDGET = "60s"      # mini-swe-agent retries a 429 (LiteLLM RateLimitError) until the clock ends it
COST = 0.0001       # USD: below the first call of the script at any impersonated model's price


@pytest.mark.slow
@pytest.mark.parametrize("agent_id", SCAFFOLDS)
def test_driver_cost_budget_stops_the_scaffold(agent_id, tmp_path):
    run_mod = needs()
    skip_unless_installed(agent_id)
    opts = run_mod.RunOptions(bundle="arith", agent=agent_id, budget=BUDGET,
                              runs_dir=tmp_path / "runs", driver="scripted:sft-recipe",
                              driver_cost=COST)
    ctx = run_mod.prepare(opts, report=lambda _: None)
    run_mod.execute(ctx, report=lambda _: None)
    run = json.loads((ctx.run_dir / "run.json").read_text())
    events = read_events(ctx.run_dir / "events.jsonl")
    types = [e["type"] for e in events]
    assert "driver_budget_exhausted" in types
    calls = [e["data"] for e in events if e["type"] == "driver_call"]
    refused = [c for c in calls if c["status"] != 200]
    # Admission reserves a call's worst case (input estimate + output cap): the first call may
    # already be refused on its input alone, and what was served stays within the budget
    # (the scripted driver's usage aside: it reports its script's numbers whatever the cap).
    assert refused, calls
    assert all(c["cost_usd"] == 0 and c["output_tokens"] == 0 for c in refused)
    assert {c["wire"] for c in calls} == {agent_spec(agent_id)["driver"]["wire"]}
    assert run["baseline_score"] is not None
    assert run["status"] in ("finished", "agent_failed", "no_submission"), run["status"]
    assert run["driver_usage"]["exhausted"]
