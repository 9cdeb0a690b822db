"""Agent params in a run (issue 26.4): `--agent-param NAME=VALUE` is checked against the agent
bundle's declarations before anything is written, run.json records the effective values, and
the agent gets them as one JSON object in `A2C_AGENT_PARAMS` (fast: prepare only)."""

from __future__ import annotations

import json

import pytest

from a2c.contracts.agent_params import AgentParamError
from a2c.runtime import run as run_mod
from a2c.runtime.run.agent import sandbox_spec


def _prepare(tmp_path, agent="ref-sft", **kw):
    opts = run_mod.RunOptions(bundle="arith", agent=agent, model="tiny", budget="90s",
                              runs_dir=tmp_path / "runs", mode="sft-only", **kw)
    return run_mod.prepare(opts, report=lambda _: None)


def test_the_effective_params_are_recorded_and_handed_to_the_agent(tmp_path):
    ctx = _prepare(tmp_path, agent_params={"steps": "10", "lr": "1e-4"})
    params = json.loads(ctx.paths.run_json.read_text())["options"]["agent_params"]
    # every declared param, the given ones typed, the rest at their defaults
    assert params["steps"] == 10 and params["lr"] == 1e-4
    assert params["stages"] == 2 and params["batch"] == 8 and params["threads"] == 0
    agent = run_mod.resolve.load_agent(ctx.paths.agent, verify=False)
    assert set(params) == set(agent["params"])
    spec = sandbox_spec(agent, ctx.run, ctx.paths, True, {})
    assert json.loads(spec.env["A2C_AGENT_PARAMS"]) == params


def test_an_agent_without_params_gets_no_variable(tmp_path):
    ctx = _prepare(tmp_path, agent="ref-copy")
    assert json.loads(ctx.paths.run_json.read_text())["options"]["agent_params"] == {}
    agent = run_mod.resolve.load_agent(ctx.paths.agent, verify=False)
    assert "A2C_AGENT_PARAMS" not in sandbox_spec(agent, ctx.run, ctx.paths, True, {}).env


@pytest.mark.parametrize("params, message", [
    ({"stepz": "10"}, "agent ref-sft has no param stepz (its params: batch, lr,"),
    ({"steps": "ten"}, "steps='ten': not a valid integer"),
    ({"steps": "0"}, "steps=0: at least 1"),
])
def test_a_refused_param_writes_nothing(tmp_path, params, message):
    with pytest.raises(AgentParamError, match=message.replace("(", r"\(")):
        _prepare(tmp_path, agent_params=params)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_cli_refuses_an_unknown_param_with_exit_2(tmp_path, capsys):
    from a2c.cli import main
    code = main(["run", "arith", "--agent", "ref-sft", "--model", "tiny", "--runs-dir",
                 str(tmp_path / "runs"), "--agent-param", "nope=1"])
    err = capsys.readouterr().err
    assert code == 2 and "has no param nope" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert main(["run", "arith", "--agent", "ref-sft", "--agent-param", "steps"]) == 2
    assert "write NAME=VALUE" in capsys.readouterr().err


def test_the_cli_passes_the_params_to_the_run(monkeypatch):
    from a2c.cli import build_parser
    from a2c.cli import run as run_cli
    seen = {}

    def fake_prepare(opts, progress):
        seen["opts"] = opts
        raise SystemExit(0)

    monkeypatch.setattr(run_cli, "prepare_from_refs", fake_prepare)
    monkeypatch.setattr("a2c.cli.doctor.preflight", lambda *a, **k: None)
    args = build_parser().parse_args(["run", "arith", "--agent", "ref-sft", "--agent-param",
                                      "steps=10", "--agent-param", "lr=1e-4"])
    with pytest.raises(SystemExit):
        run_cli.handle_run(args)
    assert seen["opts"].agent_params == {"steps": "10", "lr": "1e-4"}


def test_agent_env_cannot_set_the_runtimes_variables(tmp_path):
    from a2c.errors import RunError
    with pytest.raises(RunError, match="A2C_AGENT_PARAMS, A2C_SEED: A2C_\\* variables"):
        _prepare(tmp_path, agent_env={"A2C_SEED": "1", "A2C_AGENT_PARAMS": "{}"})
