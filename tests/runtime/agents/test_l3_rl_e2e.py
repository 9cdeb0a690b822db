"""End to end: `a2c run textquest --agent ref-l3-rl --mode rl-only` with SmolLM2 on the CPU.

The agent plays the training games with its own policy, GRPO-updates it from those episodes (no
supervised step anywhere) and submits; the grading service plays the submitted model on the
held-out games. This test proves the route through the bundle's own tools inside the sandbox and
the budget: at least one GRPO update from informative episode groups, a valid submission scored
on the held-out games, the report's route "GRPO (online rollouts)" with no warm-up and an rl-only
compliance line that says `complies`. A held-out *gain* needs more updates than CI's 2 cores give
in a few minutes (docs/level3.md, "Reference agent: online RL": ~3 minutes an iteration); set
A2C_L3_RL_TEST_GAIN=1 (and a longer A2C_L3_RL_TEST_BUDGET) to assert one whose interval excludes
zero. Slow (CI: --runslow).
"""

from __future__ import annotations

import json
import os

import pytest

from a2c.runtime import run as run_mod

# What CI can afford on 2 CPU cores (docs/level3.md, "Reference agent: online RL").
CI_KNOBS = {"A2C_L3_RL_GAMES": "4", "A2C_L3_RL_GROUP": "4", "A2C_L3_RL_MAX_GROUPS": "2",
            "A2C_L3_RL_EXPLORE": "0.6", "A2C_L3_RL_CHECK_EVERY": "2"}
CI_BUDGET = os.environ.get("A2C_L3_RL_TEST_BUDGET", "5m")
ASSERT_GAIN = os.environ.get("A2C_L3_RL_TEST_GAIN") == "1"


@pytest.mark.slow
def test_textquest_ref_l3_rl_rl_only_learns_from_its_own_episodes(tmp_path):
    from a2c.analysis.report import build_report
    from a2c.analysis.training_methods import ONLINE_GRPO

    opts = run_mod.RunOptions(bundle="textquest", agent="ref-l3-rl", mode="rl-only",
                              budget=CI_BUDGET, runs_dir=tmp_path / "runs",
                              agent_env={**CI_KNOBS, **{k: v for k, v in os.environ.items()
                                                        if k.startswith("A2C_L3_RL_")}})
    ctx = run_mod.prepare(opts, report=lambda _: None)
    summary = run_mod.execute(ctx, report=lambda _: None)
    run_dir = ctx.run_dir
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "finished" and run["mode"] == "rl-only", run
    assert run["valid_submissions"] >= 1, run
    best = max((json.loads(p.read_text()) for p in (run_dir / "results").glob("*.json")
                if p.stem != "baseline"), key=lambda r: r["score"])
    baseline = json.loads((run_dir / "results" / "baseline.json").read_text())
    assert best["valid"] and best["n_items"] == baseline["n_items"] > 0, best
    if ASSERT_GAIN:   # a gain whose interval excludes zero: best's lower bound above the baseline
        assert best["score"] > baseline["score"], (baseline["score"], best["score"])
        assert best["ci95"][0] > baseline["ci95"][1], (baseline["ci95"], best["ci95"])
    # the agent's own log: it learned from its own episodes (an update on informative groups),
    # with no warm-up
    log = (run_dir / "logs" / "agent.log").read_text(errors="replace")
    assert "no warm-up" in log and "l3_sft" not in log
    updates = json.loads((run_dir / "workspace" / "tmp" / "l3-rl-history.json").read_text())
    assert any(u.get("informative_games", 0) > 0 and u.get("seconds", 0) > 0 for u in updates), \
        updates
    report = build_report(run_dir)
    route = report["route"]
    assert route["methods"] == [ONLINE_GRPO], route["methods"]
    assert route["compliance"]["verdict"] == "complies", route["compliance"]
    assert "GRPO from online rollouts, no warm-up" in route["compliance"]["detail"]
    print(f"\ntextquest rl-only: baseline {baseline['score']:.1f}, best {best['score']:.1f} "
          f"CI {best['ci95']}, agent {summary.get('agent_s', '?')} s; "
          f"{route['compliance']['detail']}")
