"""End to end: `a2c run textquest --agent ref-l3-rl --mode rl-only` with SmolLM2 on the CPU.

The agent plays the training games with its own policy, GRPO-updates it from those episodes (no
supervised step anywhere) and submits; the grading service plays the submitted model on the
held-out games. The test asserts a held-out gain whose bootstrap interval excludes zero, that the
report classifies the route as online RL with no warm-up, and that its rl-only compliance line
says `complies`. Slow (CI: --runslow); sized by A2C_L3_RL_* knobs to fit ~4 minutes here.
"""

from __future__ import annotations

import json
import os

import pytest

from a2c.runtime import run as run_mod

# What CI can afford on 2 CPU cores (docs/level3.md, "Reference agent: online RL").
CI_KNOBS = {"A2C_L3_RL_GAMES": "8", "A2C_L3_RL_GROUP": "4", "A2C_L3_RL_EXPLORE": "0.6",
            "A2C_L3_RL_CHECK_EVERY": "2"}
CI_BUDGET = os.environ.get("A2C_L3_RL_TEST_BUDGET", "6m")


@pytest.mark.slow
def test_textquest_ref_l3_rl_rl_only_beats_baseline(tmp_path):
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
    # a gain whose interval excludes zero: the best submission's lower bound above the baseline
    assert best["score"] > baseline["score"], (baseline["score"], best["score"])
    assert best["ci95"][0] > baseline["ci95"][1], (baseline["ci95"], best["ci95"])
    # the agent's own log: it learned from its episodes, no warm-up
    log = (run_dir / "logs" / "transcript.log").read_text() \
        if (run_dir / "logs" / "transcript.log").is_file() else ""
    assert "no warm-up" in log and "l3_sft" not in log
    report = build_report(run_dir)
    route = report["route"]
    assert route["methods"] == [ONLINE_GRPO], route["methods"]
    assert route["compliance"]["verdict"] == "complies", route["compliance"]
    assert "GRPO from online rollouts, no warm-up" in route["compliance"]["detail"]
    print(f"\ntextquest rl-only: baseline {baseline['score']:.1f}, best {best['score']:.1f} "
          f"CI {best['ci95']}, agent {summary.get('agent_s', '?')} s; "
          f"{route['compliance']['detail']}")
