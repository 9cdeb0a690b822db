"""Reference agents: their training targets, reward and mode rules (fast); GRPO's score gain with
SmolLM2 (slow: real TRL training on the CPU). ref-sft's 20-point gain is asserted in
test_final_split_e2e.py (the same agent, also recording the final split)."""

from __future__ import annotations

import json

import pytest

from a2c.agents.kit import answers, context
from a2c.agents.reference.grpo import make_reward


def test_completion_for_arith_record():
    record = {"id": "t-1", "prompt": "What is 12 plus 34? End your reply with '#### ' followed "
                                     "by the number.", "answer": "46"}
    assert answers.completion_for(record) == "12 + 34 = 46\n#### 46"


def test_completion_for_gsm8k_style_and_plain():
    assert answers.completion_for({"prompt": "q", "answer": "3 + 4 = 7\n#### 7"}) == \
        "3 + 4 = 7\n#### 7"
    assert answers.completion_for({"prompt": "Name a number", "answer": "7"}) == "#### 7"
    assert answers.completion_for({"prompt": "x", "answer": "5", "solution": "two and three"}) \
        == "two and three\n#### 5"


def test_extract_and_compare():
    assert answers.extract_answer("so 12 + 34 = 46\n#### 46") == "46"
    assert answers.extract_answer("#### 1,234.") == "1234"
    assert answers.extract_answer("no answer") is None
    assert answers.same_number("46", "46.0") and not answers.same_number("46", None)


def test_reward_exact_match_with_format_bonus():
    reward = make_reward(answers.DEFAULT_PATTERN)
    completions = [[{"role": "assistant", "content": "12 + 34 = 46\n#### 46"}],
                   [{"role": "assistant", "content": "#### 45"}],
                   [{"role": "assistant", "content": "46"}]]
    assert reward(completions=completions, answer=["46", "46", "46"]) == [1.1, 0.1, 0.0]


def test_context_from_env(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(json.dumps({"id": "1", "prompt": "p",
                                                               "answer": "2"}) + "\n")
    (tmp_path / "run_meta.json").write_text(json.dumps({
        "mode": "sft-only", "deadline": 123.0, "seed": 7,
        "task": {"prompt_template": "Q: {prompt}", "answer_pattern": "ANS (\\d+)"}}))
    monkeypatch.setenv("A2C_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("A2C_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("A2C_BASE_MODEL", str(tmp_path / "model"))
    monkeypatch.delenv("A2C_MODE", raising=False)
    monkeypatch.delenv("A2C_DEADLINE", raising=False)
    monkeypatch.delenv("A2C_SEED", raising=False)
    ctx = context.AgentContext.from_env()
    assert ctx.mode == "sft-only" and ctx.deadline == 123.0 and ctx.seed == 7
    assert ctx.format_prompt({"prompt": "hi"}) == "Q: hi"
    assert ctx.answer_pattern == "ANS (\\d+)"
    assert ctx.load_train()[0]["answer"] == "2"


def test_sft_agent_refuses_rl_only(tmp_path, monkeypatch):
    from a2c.agents.reference import sft
    monkeypatch.setenv("A2C_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("A2C_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("A2C_BASE_MODEL", str(tmp_path))
    monkeypatch.setenv("A2C_MODE", "rl-only")
    assert sft.main([]) == 3


def _reference_run(tmp_path, agent, budget, params=None):
    from a2c.runtime import run as run_mod
    opts = run_mod.RunOptions(bundle="arith", agent=agent, budget=budget,
                              runs_dir=tmp_path / "runs", agent_params=params or {})
    ctx = run_mod.prepare(opts, report=print)
    return ctx, run_mod.execute(ctx, report=print)


def run_mod_journal(run_dir):
    from a2c.runtime import run as run_mod
    return {str(k): v for k, v in run_mod.journal_state(run_dir)["scored"].items()}


@pytest.mark.slow
def test_grpo_reference_agent_beats_baseline(tmp_path):
    # a warm-up of 10 SFT steps, then one GRPO stage of 4 steps: measured 0 -> 63 (warm-up) and
    # 58 (GRPO) in 107 s (the demo's 20 warm-up steps: 73 and 70 in 135 s), both far above the
    # baseline's 0
    ctx, summary = _reference_run(tmp_path, "ref-grpo", "7m",
                                  {"sft_steps": 10, "steps": 4, "stages": 1})
    assert summary["status"] == "finished"
    assert summary["submissions"] == 2, summary
    assert summary["best_score"] > summary["baseline_score"], summary
    events = [json.loads(line) for line in (ctx.run_dir / "events.jsonl").read_text().splitlines()]
    notes = [e["data"] for e in events if e["type"] == "submission_received"]
    assert len(notes) == 2
    # The GRPO stage's own model (submission 2) beats the baseline too, not only the warm-up.
    scored = run_mod_journal(ctx.run_dir)
    assert scored["2"]["valid"] and scored["2"]["score"] > summary["baseline_score"], scored


@pytest.mark.slow
def test_copy_agent_scores_baseline_and_is_flagged(tmp_path):
    from a2c.runtime import run as run_mod
    opts = run_mod.RunOptions(bundle="arith", agent="ref-copy", model="tiny", budget="2m",
                              runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=print)
    summary = run_mod.execute(ctx, report=print)
    assert summary["submissions"] == 1
    assert summary["best_score"] == summary["baseline_score"]
    (scored,) = run_mod.journal_state(ctx.run_dir)["scored"].values()
    assert scored["copy_of_base"] is True
    assert json.loads((ctx.run_dir / "run.json").read_text())["copies_of_base"] == 1
