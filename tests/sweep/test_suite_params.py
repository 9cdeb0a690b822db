"""Agent params in a suite (issue 26.4): `agent_params: {agent: {param: value}}` at the top level
or in a group (merged param by param), checked against the agent's declarations, typed, part of
the trial id only when given, and passed to the trial's `a2c run` as `--agent-param`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2c.compiler.build import plan
from a2c.contracts.trial import Trial, trial_content, trial_id
from a2c.errors import SpecError
from a2c.sweep.plan import TrialPlan

BASE = "tasks: [arith]\nagents: [ref-sft, ref-copy]\n"


def trials(path):
    (art,) = plan([path])
    return json.loads(art.files["suite.json"])["suite"]["trials"]


def problems(path) -> list[str]:
    with pytest.raises(SpecError) as exc:
        plan([path])
    return exc.value.problems


def test_a_trial_without_params_keeps_its_id(write_suite):
    plain = {t["agent"]: t for t in trials(write_suite(BASE))}
    sft = plain["ref-sft"]
    # the id is the hash of the same content as before params existed: no agent_params key
    content = trial_content(sft["task_digest"], sft["agent_digest"], None, "free", 0,
                            {"budget": {}, "base_model": None, "backend": None})
    assert sft["id"] == trial_id("arith", "ref-sft", content)
    assert "agent_params" not in sft["overrides"]
    given = {t["agent"]: t for t in trials(write_suite(
        BASE + "agent_params: {ref-sft: {steps: 10, lr: 1.0e-4}}\n"))}
    assert given["ref-copy"]["id"] == plain["ref-copy"]["id"]
    assert given["ref-sft"]["id"] != sft["id"]
    assert given["ref-sft"]["overrides"]["agent_params"] == {"lr": 1e-4, "steps": 10}
    # typed: a string that means the same value is the same trial
    same = {t["agent"]: t for t in trials(write_suite(
        BASE + "agent_params: {ref-sft: {steps: '10', lr: 0.0001}}\n"))}
    assert same["ref-sft"]["id"] == given["ref-sft"]["id"]


def test_trials_md_shows_the_params_beside_the_agent(write_suite):
    (art,) = plan([write_suite(BASE + "agent_params: {ref-sft: {steps: 10}}\n")])
    table = art.files["TRIALS.md"].decode()
    assert "| arith | ref-sft (steps=10) | — |" in table and "| arith | ref-copy | — |" in table


def test_groups_merge_params_over_the_top_level(write_suite):
    ts = trials(write_suite(
        "tasks: [arith]\nagents: [ref-sft]\nagent_params: {ref-sft: {steps: 10, batch: 4}}\n"
        "groups:\n  short: {}\n  long: {agent_params: {ref-sft: {steps: 40}}}\n"))
    by_group = {t["group"]: t["overrides"]["agent_params"] for t in ts}
    assert by_group == {"short": {"batch": 4, "steps": 10}, "long": {"batch": 4, "steps": 40}}


@pytest.mark.parametrize("extra, message", [
    ("agent_params: {ref-sft: {stepz: 10}}\n", "agent 'ref-sft' has no param 'stepz'"),
    ("agent_params: {ref-sft: {steps: 0}}\n", "steps=0: at least 1"),
    ("agent_params: {ref-sft: {steps: ten}}\n", "not a valid integer"),
    ("agent_params: {ref-copy: {steps: 1}}\n", "agent 'ref-copy' has no param 'steps' "
                                               "(its params: none)"),
    ("agent_params: {ref-grpo: {steps: 1}}\n", "which group 'main' does not run"),
])
def test_the_checks_refuse_what_the_agent_does_not_declare(write_suite, extra, message):
    found = problems(write_suite(BASE + extra))
    assert any(message in p and "agent_params" in p for p in found), found


def test_a_trial_runs_with_its_params(tmp_path):
    trial = Trial(id="t", task="arith", agent="ref-l3-rl", mode="free", seed=0,
                  overrides={"agent_params": {"games": 4, "warmup": False, "lr": 1e-4}})
    argv = TrialPlan(trial, tmp_path / "runs" / "t", Path("task"), Path("agent")).run_argv()
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "--agent-param"]
    assert pairs == ["games=4", "lr=0.0001", "warmup=false"]
