"""`a2c agents list|install` and the `a2c run` driver flags and summary (fast; fake npm, no
network)."""

from __future__ import annotations

import json

import pytest

from a2c.cli import build_parser, main
from a2c.cli.run import Progress, driver_line
from a2c.contracts.run_summary import DriverUsage, RunSummary
from a2c.contracts.spec import AgentSpec


def test_run_driver_flags_parse_and_refuse_bad_values(capsys):
    parser = build_parser()
    args = parser.parse_args(["run", "arith", "--agent", "claude-code", "--driver",
                              "scripted:sft-recipe", "--driver-tokens", "5000",
                              "--driver-cost", "0.25", "--driver-calls", "12"])
    assert (args.driver_tokens, args.driver_cost, args.driver_calls) == (5000, 0.25, 12)
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "arith", "--agent", "x", "--driver-cost", "-1"])
    assert "must be positive" in capsys.readouterr().err


def test_summary_prints_the_driver_line_and_the_log_tail(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    result = {"run_id": "r", "task": "arith", "agent": "claude-code", "mode": "free",
              "isolation": "bubblewrap", "baseline_score": 10.0, "best_score": None,
              "final_score": None, "submissions": 0, "valid_submissions": 0,
              "status": "agent_failed", "run_dir": "/tmp/r", "driver": "scripted:sft-recipe",
              "driver_usage": {"calls": 3, "tokens": 1500, "input_tokens": 1200,
                               "output_tokens": 300, "cost_usd": 0.0081, "errors": 1,
                               "exhausted": None},
              "agent_log_tail": ["Error: something broke", "exit 1"]}
    Progress().summary(RunSummary.from_dict(result))
    out = capsys.readouterr().out
    assert ("scripted:sft-recipe (scripted driver): 3 call(s), 1,500 tokens (1,200 in, 300 "
            "out), $0.0081") in out
    assert "agent_failed" in out and "Error: something broke" in out and "exit 1" in out
    # one reason line (the last thing the agent said) instead of the raw tail
    Progress().summary(RunSummary.from_dict({**result, "reason": "Out of time at step 15."}))
    out = capsys.readouterr().out
    assert "agent_failed: Out of time at step 15." in out and "exit 1" not in out
    assert driver_line("x", None) == "x: no calls"
    cached = {"calls": 2, "tokens": 166050, "input_tokens": 10000, "output_tokens": 2050,
              "cache_read_tokens": 154000, "cost_usd": 0.01}
    assert "166,050 tokens (10,000 in, 2,050 out, 154,000 cache read)" in driver_line("x", DriverUsage.from_dict(cached))
    spent = {"calls": 1, "tokens": 2, "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.5,
             "exhausted": {"limit": "driver_cost_usd", "budget": 0.4, "used": 0.5}}
    assert driver_line("x", DriverUsage.from_dict(spent)).endswith("; driver budget spent (driver_cost_usd)")


def test_agents_list_names_every_bundle(capsys):
    assert main(["agents", "list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["agents"]}
    assert rows["claude-code"]["type"] == "cli" and rows["ref-sft"]["type"] == "reference"
    assert rows["claude-code"]["install"][0].startswith("npm @anthropic-ai/claude-code@")
    assert rows["ref-sft"]["command"] is None
    assert "steps" in rows["ref-sft"]["params"] and rows["claude-code"]["params"] == []


def test_agents_params_shows_what_agent_param_accepts(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["agents", "params", "ref-l3-rl", "--json"]) == 0
    params = json.loads(capsys.readouterr().out)["params"]
    assert params["bf16"]["enum"] == ["auto", "on", "off"] and params["games"]["type"] == "integer"
    assert main(["agents", "params", "ref-sft"]) == 0
    out = capsys.readouterr().out
    assert "a2c run --agent-param NAME=VALUE" in out
    assert "steps" in out and "integer" in out and ">= 1" in out and "5e-05" in out
    assert main(["agents", "params", "claude-code"]) == 0
    assert "claude-code declares no params" in capsys.readouterr().out
    assert main(["agents", "params", "no-such-agent"]) == 2
    assert "no-such-agent" in capsys.readouterr().err


def test_agents_install_dry_run_prints_only(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))    # no npm reachable: nothing may run
    assert main(["agents", "install", "claude-code", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would run: npm install --prefix " in out and "@anthropic-ai/claude-code@" in out
    assert " -g " not in out
    assert main(["agents", "install", "--all", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "claude-code:" in out and "ref-sft" not in out


def test_agents_install_needs_one_agent_or_all(capsys):
    assert main(["agents", "install"]) == 1
    assert "usage: a2c agents install" in capsys.readouterr().err


def test_agents_install_missing_skips_a_command_install_whose_command_is_found(
        capsys, tmp_path, monkeypatch):
    """An agent installed by a shell command (OpenHands' uv) manages its own place: with
    --missing it is skipped when the sandbox finds its command, else the command runs."""
    agent = {"id": "cmd", "type": "cli", "launch": {"command": "cmd-cli -p x"},
             "install": {"commands": [f"touch {tmp_path / 'ran'}"], "check": "cmd-cli"}}
    monkeypatch.setattr("a2c.cli.agents.load_one", lambda ref: AgentSpec.from_dict(agent))
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    assert main(["agents", "install", "cmd", "--missing", "--prefix", str(prefix)]) == 0
    assert (tmp_path / "ran").exists()
    (tmp_path / "ran").unlink()
    (prefix / "bin" / "cmd-cli").write_text("#!/bin/sh\n")
    (prefix / "bin" / "cmd-cli").chmod(0o755)
    capsys.readouterr()
    assert main(["agents", "install", "cmd", "--missing", "--prefix", str(prefix)]) == 0
    assert not (tmp_path / "ran").exists()
    assert f"cmd  present    `cmd-cli` is {prefix / 'bin' / 'cmd-cli'}" in capsys.readouterr().out


def test_agents_install_failure_is_one_line_with_the_commands_last_lines(
        tmp_path, monkeypatch, capsys):
    agent = {"id": "fake", "type": "cli", "launch": {"command": "x"},
             "install": {"commands": ["echo first; echo last words; exit 7"]}}
    monkeypatch.setattr("a2c.cli.agents.load_one", lambda ref: AgentSpec.from_dict(agent))
    assert main(["agents", "install", "fake", "--prefix", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "fake  failed     `bash -c 'echo first; echo last words; exit 7'` " \
                     "failed (exit 7)"
    assert out[1:3] == ["      | first", "      | last words"]
