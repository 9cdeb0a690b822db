"""`a2c agents list|install` and the `a2c run` driver flags and summary (fast; fake npm, no
network)."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from a2c.cli import build_parser, main
from a2c.cli.agents import install, plan
from a2c.cli.run import Progress, driver_line


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
    Progress().summary(result)
    out = capsys.readouterr().out
    assert ("scripted:sft-recipe (scripted driver): 3 call(s), 1,500 tokens (1,200 in, 300 "
            "out), $0.0081") in out
    assert "agent_failed" in out and "Error: something broke" in out and "exit 1" in out
    # one reason line (the last thing the agent said) instead of the raw tail
    Progress().summary({**result, "reason": "Out of time at step 15."})
    out = capsys.readouterr().out
    assert "agent_failed: Out of time at step 15." in out and "exit 1" not in out
    assert driver_line("x", None) == "x: no calls"
    cached = {"calls": 2, "tokens": 166050, "input_tokens": 10000, "output_tokens": 2050,
              "cache_read_tokens": 154000, "cost_usd": 0.01}
    assert "166,050 tokens (10,000 in, 2,050 out, 154,000 cache read)" in driver_line("x", cached)
    spent = {"calls": 1, "tokens": 2, "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.5,
             "exhausted": {"limit": "driver_cost_usd", "budget": 0.4, "used": 0.5}}
    assert driver_line("x", spent).endswith("; driver budget spent (driver_cost_usd)")


def test_agents_list_names_every_bundle(capsys):
    assert main(["agents", "list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["agents"]}
    assert rows["claude-code"]["type"] == "cli" and rows["ref-sft"]["type"] == "reference"
    assert rows["claude-code"]["install"][0].startswith("npm install -g @anthropic-ai/claude-code")
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
    assert "would run: npm install -g @anthropic-ai/claude-code" in out
    assert main(["agents", "install", "--all", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "claude-code:" in out and "ref-sft" not in out


def test_agents_install_needs_one_agent_or_all(capsys):
    assert main(["agents", "install"]) == 1
    assert "usage: a2c agents install" in capsys.readouterr().err


def test_agents_install_several_ids_and_missing_skips_what_the_sandbox_finds(
        capsys, tmp_path, monkeypatch):
    """Set-up runs `a2c agents install ID ... --missing` every time: a scaffold whose command is
    on the sandbox's PATH is skipped, one that is not is installed."""
    (tmp_path / "claude").write_text("#!/bin/sh\n")
    (tmp_path / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("a2c.cli.agents._search_path", lambda prefix: str(tmp_path))
    assert main(["agents", "install", "claude-code", "codex", "--missing", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"claude-code: `claude` is {tmp_path / 'claude'} (already installed)" in out
    assert "npm install -g @anthropic-ai/claude-code" not in out
    assert "would run: npm install -g @openai/codex@" in out


def _fake_npm(folder, record):
    npm = folder / "npm"
    npm.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\n")
    npm.chmod(npm.stat().st_mode | stat.S_IXUSR)


def test_agents_install_runs_npm_and_commands(tmp_path, monkeypatch, capsys):
    record = tmp_path / "npm-calls"
    _fake_npm(tmp_path, record)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    agent = {"id": "fake", "type": "cli", "launch": {"command": "fake-cli -p x"},
             "install": {"npm": ["@example/fake-cli@1.2.3"], "pip": [],
                         "commands": [f"touch {tmp_path / 'ran'}"]}}
    install(agent, tmp_path / "prefix", dry_run=False)
    assert record.read_text().split() == ["install", "-g", "@example/fake-cli@1.2.3"]
    assert (tmp_path / "ran").exists()
    out = capsys.readouterr().out
    assert "+ npm install -g @example/fake-cli@1.2.3" in out


def test_agents_install_failure_is_a_clean_error(tmp_path, monkeypatch):
    from a2c.errors import RunError
    agent = {"id": "fake", "type": "cli", "launch": {"command": "x"},
             "install": {"commands": ["exit 7"]}}
    with pytest.raises(RunError, match="`exit 7` failed with status 7"):
        install(agent, tmp_path, dry_run=False, echo=lambda _: None)


def test_pip_scaffolds_get_a_venv_of_their_own_linked_into_prefix_bin(tmp_path):
    agent = {"id": "mini", "type": "cli", "launch": {"command": "mini"},
             "install": {"pip": ["mini-swe-agent==1.9.0"]}}
    steps = plan(agent, tmp_path)
    assert [s["kind"] for s in steps] == ["venv", "pip", "link"]
    assert steps[0]["argv"][:3] == [sys.executable, "-m", "venv"]
    assert steps[0]["argv"][-1] == str(tmp_path / "lib" / "a2c-agents" / "mini")
    assert steps[1]["argv"][-1] == "mini-swe-agent==1.9.0"
    assert steps[1]["argv"][0] == str(tmp_path / "lib" / "a2c-agents" / "mini" / "bin" /
                                      "python")


def test_link_step_links_only_new_commands(tmp_path):
    from a2c.cli.agents import _link
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "pip", "activate", "mini", "mini-extra"):
        (venv / "bin" / name).write_text("")
    linked = _link(venv, tmp_path / "bin", {"python", "pip", "activate"}, lambda _: None)
    assert linked == ["mini", "mini-extra"]
    assert (tmp_path / "bin" / "mini").resolve() == (venv / "bin" / "mini").resolve()
