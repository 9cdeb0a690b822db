"""A scaffold's (agent type `cli`) side of a run: driver budgets from the spec and the flags,
the sandbox it gets (gateway socket, home, no provider key), the pre-flight that leaves nothing
behind, and the statuses a run ends with."""

from __future__ import annotations

import json
import stat

import pytest
from driver_helpers import DRIVER, FAKE_KEY, configure_fake_provider, make_cli_agent

from a2c.contracts.budget import Budget
from a2c.contracts.run_info import AgentExit
from a2c.errors import RunError
from a2c.runtime import run as run_mod
from a2c.runtime.run.agent import log_tail, sandbox_spec
from a2c.runtime.run.ending import end_status
from a2c.runtime.run.scaffold import (
    PreflightError,
    check_command,
    driver_model,
    install_hint,
    install_steps,
)
from a2c.runtime.sandbox.local import agent_env, build_bwrap_argv


def _prepare(tmp_path, agent, **kw):
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny",
                              budget=kw.pop("budget", "60s"), runs_dir=tmp_path / "runs", **kw)
    return run_mod.prepare(opts, report=lambda _: None)


# ----------------------------------------------------------------------------- budgets
def test_driver_budget_fields_resolve_for_tasks_and_suites(tmp_path):
    from a2c.compiler.load import load_document
    from a2c.compiler.resolve import resolve_suite, resolve_task
    from a2c.paths import project_root
    base = project_root() / "specs" / "tasks" / "arith.yaml"
    spec = tmp_path / "arith-driver.yaml"
    spec.write_text(f"extends: {base}\nid: arith-driver\ndescription: Sums.\n"
                    "budget: {driver_tokens: 200000, driver_cost: 1.5, driver_calls: 40}\n")
    budget = resolve_task(load_document(spec, "Task"))["budget"]
    assert budget["driver_tokens"] == 200000 and budget["driver_cost_usd"] == 1.5
    assert budget["driver_calls"] == 40 and "driver_cost" not in budget
    plain = resolve_task(load_document(base, "Task"))["budget"]
    assert not {"driver_tokens", "driver_cost_usd", "driver_calls"} & set(plain)
    for kind in ("tasks", "agents"):
        (tmp_path / kind).symlink_to(project_root() / "specs" / kind)
    (tmp_path / "suites").mkdir()
    suite = tmp_path / "suites" / "s.yaml"
    suite.write_text("apiVersion: a2c/v1\nkind: Suite\nid: s\ntitle: S\ntasks: [arith]\n"
                     "agents: [claude-code]\nbudget: {driver_cost: 0.25}\n")
    assert resolve_suite(load_document(suite, "Suite"))["budget"] == {"driver_cost_usd": 0.25}


def test_bad_driver_budget_is_a_spec_error(tmp_path):
    from a2c.compiler.load import load_document
    from a2c.errors import SpecError
    from a2c.paths import project_root
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"extends: {project_root() / 'specs/tasks/arith.yaml'}\nid: bad\n"
                    "description: Sums.\n"
                    "budget: {driver_tokens: 0}\n")
    with pytest.raises(SpecError, match="driver_tokens"):
        load_document(spec, "Task")


def test_prepare_records_the_driver_budget_with_overrides(tmp_path, monkeypatch):
    configure_fake_provider(monkeypatch)
    agent = make_cli_agent(tmp_path, "fake-cli", "true\n")
    ctx = _prepare(tmp_path, agent, driver=DRIVER, driver_tokens=5000, driver_calls=3)
    run = json.loads(ctx.paths.run_json.read_text())
    assert run["driver"] == DRIVER
    assert Budget.from_dict(run["budget"]).driver_limits() == \
        {"driver_tokens": 5000, "driver_cost_usd": None, "driver_calls": 3}
    assert ctx.run.budget.driver_tokens == 5000
    config = json.loads(ctx.paths.driver_config.read_text())
    assert config["budget"] == {"driver_tokens": 5000, "driver_cost_usd": None, "driver_calls": 3}
    assert FAKE_KEY not in ctx.paths.driver_config.read_text()
    assert stat.S_IMODE(ctx.paths.driver.stat().st_mode) == 0o700
    assert stat.S_IMODE(ctx.paths.driver_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(ctx.paths.agent_home.stat().st_mode) == 0o700


def test_driver_flags_are_refused_for_a_reference_agent(tmp_path):
    with pytest.raises(RunError, match="--driver-cost: agent ref-sft has no driver model"):
        _prepare(tmp_path, "ref-sft", driver_cost=1.0)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("key", ["ANTHROPIC_API_KEY", "FAKE_PROVIDER_API_KEY", "MY_AUTH_TOKEN"])
def test_a_provider_key_in_pass_env_is_refused(tmp_path, monkeypatch, key):
    configure_fake_provider(monkeypatch)
    agent = make_cli_agent(tmp_path, "leaky-cli", "true\n", pass_env=[key, "TERM"])
    with pytest.raises(RunError, match=f"pass_env names {key}, a provider key"):
        _prepare(tmp_path, agent, driver=DRIVER)
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_an_unknown_provider_leaves_no_run_directory(tmp_path, monkeypatch):
    configure_fake_provider(monkeypatch)
    agent = make_cli_agent(tmp_path, "fake-cli", "true\n")
    with pytest.raises(RunError, match="unknown provider"):
        _prepare(tmp_path, agent, driver="nowhere/some-model")
    assert not any((tmp_path / "runs").iterdir())


# ----------------------------------------------------------------------------- the sandbox
def test_a_scaffold_sandbox_has_the_gateway_and_a_home_and_no_provider_key(tmp_path,
                                                                           monkeypatch):
    configure_fake_provider(monkeypatch)
    monkeypatch.setenv("TERM_SESSION_SECRET", "x" * 12)
    agent = make_cli_agent(tmp_path, "fake-cli", "true\n", pass_env=["TERM"])
    ctx = _prepare(tmp_path, agent, driver=DRIVER)
    paths, agent_spec = ctx.paths, run_mod.resolve.load_agent(ctx.paths.agent, verify=False)
    spec = sandbox_spec(agent_spec, ctx.run, paths, True, {})
    assert spec.driver_socket == paths.driver_socket and spec.agent_home == paths.agent_home
    key = paths.driver_key.read_text().strip()
    assert spec.env["A2C_DRIVER"] == DRIVER and spec.env["A2C_DRIVER_KEY"] == key
    assert spec.env["A2C_DRIVER_MODEL"] == "claude-sonnet-4-5"
    env = agent_env(spec, confined=True)
    assert env["HOME"] == env["A2C_AGENT_HOME"] == "/run/a2c/home"
    assert env["A2C_DRIVER_SOCKET"] == "/run/a2c/driver.sock"
    assert FAKE_KEY not in json.dumps(env) and "FAKE_PROVIDER_API_KEY" not in env
    argv = build_bwrap_argv(spec, python_dirs=[])
    pairs = list(zip(argv, argv[1:], argv[2:]))
    assert ("--bind", str(paths.driver_socket), "/run/a2c/driver.sock") in pairs
    assert ("--bind", str(paths.agent_home), "/run/a2c/home") in pairs
    assert str(paths.driver) not in [a for a in argv if a != str(paths.driver_socket)]
    unconfined = agent_env(spec, confined=False)
    assert unconfined["HOME"] == str(paths.agent_home)
    assert unconfined["A2C_DRIVER_SOCKET"] == str(paths.driver_socket)
    from a2c.runtime.sandbox.docker import container_kwargs
    from a2c.runtime.sandbox.privileges import AgentIds
    kwargs = container_kwargs(spec, "img", AgentIds(1234, 1234))
    assert kwargs["volumes"][str(paths.driver_socket)] == {"bind": "/run/a2c/driver.sock",
                                                          "mode": "rw"}
    assert kwargs["volumes"][str(paths.agent_home)] == {"bind": "/run/a2c/home", "mode": "rw"}
    assert kwargs["environment"]["HOME"] == "/run/a2c/home"
    assert kwargs["network_mode"] == "none"
    assert FAKE_KEY not in json.dumps(kwargs["environment"])


def test_a_reference_agent_sandbox_is_unchanged(tmp_path):
    ctx = _prepare(tmp_path, "ref-sft")
    agent = run_mod.resolve.load_agent(ctx.paths.agent, verify=False)
    spec = sandbox_spec(agent, ctx.run, ctx.paths, True, {})
    assert spec.driver_socket is None and spec.agent_home is None
    assert "A2C_DRIVER_KEY" not in spec.env and spec.env["A2C_DRIVER_MODEL"] == ""
    env = agent_env(spec, confined=True)
    assert env["HOME"] == "/tmp" and "A2C_DRIVER_SOCKET" not in env
    assert not ctx.paths.driver.exists() and not ctx.paths.agent_home.exists()


def test_grant_gives_the_agent_its_home_and_the_gateway_socket(tmp_path):
    import os
    import socket

    from a2c.runtime.sandbox import SandboxSpec
    from a2c.runtime.sandbox.local import grants
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    from a2c.runtime.sandbox.privileges import AgentIds, grant_agent
    home, ws = tmp_path / "agent-home", tmp_path / "workspace"
    home.mkdir(mode=0o700)
    ws.mkdir()
    sock_path = tmp_path / "driver.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    os.chmod(sock_path, 0o600)
    (tmp_path / "data").mkdir()
    spec = SandboxSpec(command=["true"], workspace=ws, data_dir=tmp_path / "data",
                       model_dir=tmp_path / "data",
                       socket_path=None, log_path=tmp_path / "a.log", command_log=None,
                       driver_socket=sock_path, agent_home=home)
    grant_agent(AgentIds(54321, 54321), **grants(spec))
    assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (54321, 0o700)
    assert sock_path.stat().st_gid == 54321 and sock_path.stat().st_mode & 0o060 == 0o060
    sock.close()


# ----------------------------------------------------------------------------- small rules
def test_driver_model_install_steps_and_check():
    agent = {"id": "x", "type": "cli", "driver": {"default": "anthropic/claude-sonnet-4-5"},
             "launch": {"command": 'FOO=1 exec claude -p "$A2C_PROMPT"'},
             "install": {"npm": ["@anthropic-ai/claude-code@2.1.332"],
                         "pip": [{"package": "mini-swe-agent", "version": "1.9.0"}],
                         "commands": ["echo done"]}}
    assert driver_model("scripted:sft-recipe", agent) == "claude-sonnet-4-5"
    assert driver_model("openai/gpt-5-codex", agent) == "gpt-5-codex"
    assert driver_model("local/Qwen/Qwen3-8B", agent) == "Qwen/Qwen3-8B"
    assert check_command(agent) == "claude"
    assert check_command({**agent, "install": {"check": "claude-bin"}}) == "claude-bin"
    assert [s["shell"] for s in install_steps(agent)] == [
        "npm @anthropic-ai/claude-code@2.1.332", "pip mini-swe-agent==1.9.0",
        "echo done"]
    assert install_hint(agent).startswith("a2c agents install x (npm @anthropic-ai/")


@pytest.mark.parametrize("agent_exit,submissions,status", [
    ({"returncode": 0, "reason": "exited"}, 2, "finished"),
    ({"returncode": 1, "reason": "exited"}, 2, "agent_failed"),
    ({"returncode": 127, "reason": "exited"}, 0, "agent_failed"),
    ({"returncode": -15, "reason": "deadline"}, 1, "finished"),
    ({"returncode": -9, "reason": "deadline"}, 0, "no_submission"),
    ({"returncode": 0, "reason": "exited"}, 0, "no_submission"),
    ({"returncode": None, "reason": "no budget left at resume"}, 0, "no_submission"),
])
def test_end_status(agent_exit, submissions, status):
    assert end_status(AgentExit.from_dict(agent_exit), submissions) == status


def test_a_non_zero_exit_after_the_driver_budget_is_spent_is_no_failure():
    exited = AgentExit(1, "exited")
    assert end_status(exited, 2, driver_spent=True) == "finished"
    assert end_status(exited, 0, driver_spent=True) == "no_submission"


def test_log_tail_is_redacted_and_short(tmp_path):
    log = tmp_path / "agent.log"
    log.write_text("".join(f"line {i} key=sk-secret-value-123\n" for i in range(50)) + "x" * 900)
    tail = log_tail(log, {"K": "sk-secret-value-123"}, lines=20, width=100)
    assert len(tail) == 20 and tail[-1] == "x" * 100
    assert tail[0] == "line 31 key=[redacted:K]"
    assert log_tail(tmp_path / "missing.log") == []


# ----------------------------------------------------------------------------- pre-flight
@pytest.mark.parametrize("deep", [False, True])
def test_preflight_missing_command_exit_2_one_line_nothing_left(tmp_path, monkeypatch, deep):
    configure_fake_provider(monkeypatch)
    agent = make_cli_agent(tmp_path, "fake-cli", "true\n", check="a2c-no-such-scaffold-cli",
                           npm=["@example/fake-cli@1.2.3"])
    runs = tmp_path / ("a-long-folder-name-" * 4 if deep else "") / "runs"
    ctx = run_mod.prepare(run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny",
                                             budget="60s", runs_dir=runs, driver=DRIVER),
                          report=lambda _: None)
    short = ctx.paths.socket.parent
    assert ctx.run_dir not in short.parents or not deep   # deep: a short socket folder
    with pytest.raises(PreflightError) as info:
        run_mod.execute(ctx, report=lambda _: None)
    message = str(info.value)
    assert info.value.exit_code == 2 and "\n" not in message
    assert message == ("fake-cli: `a2c-no-such-scaffold-cli` is not installed where the agent "
                       "runs. Install it: a2c agents install fake-cli "
                       "(npm @example/fake-cli@1.2.3)")
    assert not ctx.run_dir.exists() and not short.exists()
    assert not any(runs.iterdir())


def test_preflight_dead_gateway_exit_2_nothing_left(tmp_path, monkeypatch):
    configure_fake_provider(monkeypatch)
    from a2c.runtime.run.driver import DriverGateway
    monkeypatch.setattr(DriverGateway, "start", lambda self: None)   # never listens
    agent = make_cli_agent(tmp_path, "fake-cli", "true\n")
    ctx = _prepare(tmp_path, agent, driver=DRIVER)
    with pytest.raises(PreflightError, match="fake-cli: the driver gateway for fake/claude-"
                                             "sonnet-4-5 does not answer") as info:
        run_mod.execute(ctx, report=lambda _: None)
    assert "\n" not in str(info.value)
    assert not ctx.run_dir.exists()


def test_cli_exit_code_2_on_failed_preflight(tmp_path, monkeypatch, capsys):
    configure_fake_provider(monkeypatch)
    from a2c.cli.main import main
    agent = make_cli_agent(tmp_path, "fake-cli", "true\n", check="a2c-no-such-scaffold-cli")
    rc = main(["run", "arith", "--agent", str(agent), "--model", "tiny", "--budget", "30s",
               "--driver", DRIVER, "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "is not installed where the agent runs. Install it: a2c agents install" in err[0]
    assert not any((tmp_path / "runs").iterdir())
