"""How a reference agent reads its params (issue 26.4): `params.params(AGENT_ID)` is the run's
`A2C_AGENT_PARAMS` over the declared defaults, typed by the declarations; a warm-up started as its
own command gets its own params from the parent's `sft_*` ones (fast, no model)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from a2c.agents.kit import context, params, training
from a2c.agents.reference import grpo, l3_rl
from a2c.paths import project_root


def _declared(agent_id: str) -> dict:
    path = project_root() / "generated" / "agents" / agent_id / "agent.json"
    return json.loads(path.read_text())["agent"]["params"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in ("A2C_AGENT_PARAMS", "A2C_AGENT_DIR"):
        monkeypatch.delenv(key, raising=False)


def test_the_declared_defaults_without_a_run():
    defaults = {k: d["default"] for k, d in _declared("ref-sft").items()}
    assert params.params("ref-sft") == defaults
    assert defaults == {"batch": 8, "lr": 5e-5, "max_records": 0, "stages": 2, "steps": 25,
                        "threads": 0}


def test_the_runs_values_win_typed(monkeypatch):
    monkeypatch.setenv("A2C_AGENT_PARAMS", json.dumps({"steps": "10", "lr": 1}))
    values = params.params("ref-sft")
    assert values["steps"] == 10 and values["lr"] == 1.0 and values["batch"] == 8


def test_the_runs_bundle_is_read_when_it_is_this_agents(monkeypatch, tmp_path):
    manifest = {"id": "ref-sft", "agent": {"params": {
        "steps": {"type": "integer", "default": 3, "description": "."}}}}
    (tmp_path / "agent.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("A2C_AGENT_DIR", str(tmp_path))
    assert params.params("ref-sft") == {"steps": 3}
    # another agent's bundle (a warm-up under ref-grpo): the checkout's declarations
    assert params.params("ref-l3-sft")["max_length"] == 640


def _captured_env(monkeypatch) -> dict:
    seen: dict = {}

    def fake_run(argv, cwd=None, env=None, **kw):
        seen.update(env or {})
        return subprocess.CompletedProcess(argv, 1)

    monkeypatch.setattr(subprocess, "run", fake_run)
    return seen


def _ctx(tmp_path: Path) -> context.AgentContext:
    return context.AgentContext(workspace=tmp_path, output_dir=tmp_path / "out",
                               data_dir=tmp_path, base_model=tmp_path, mode="free", seed=0,
                               deadline=0.0)


def test_ref_grpo_hands_its_warm_up_the_sft_params(monkeypatch, tmp_path):
    monkeypatch.setenv("A2C_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("A2C_AGENT_PARAMS", json.dumps({"sft_steps": 7, "sft_lr": 1e-3}))
    seen = _captured_env(monkeypatch)
    assert grpo.warm_up(_ctx(tmp_path)) is None          # the fake warm-up failed
    assert json.loads(seen["A2C_AGENT_PARAMS"]) == {
        "steps": 7, "stages": 1, "batch": 8, "lr": 1e-3, "max_records": 0, "threads": 0}
    assert set(json.loads(seen["A2C_AGENT_PARAMS"])) == set(_declared("ref-sft"))


def test_ref_l3_rl_hands_its_warm_up_the_sft_params(monkeypatch, tmp_path):
    monkeypatch.setenv("A2C_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("A2C_AGENT_PARAMS", json.dumps({"sft_steps": 5, "bf16": "off"}))
    seen = _captured_env(monkeypatch)
    assert l3_rl.warm_up(_ctx(tmp_path)) is None
    sent = json.loads(seen["A2C_AGENT_PARAMS"])
    assert sent == {"steps": 5, "batch": 4, "lr": 1e-4, "max_length": 640, "bf16": "off"}
    # exactly what ref-l3-sft declares: its own defaults never needed
    assert set(sent) == set(_declared("ref-l3-sft"))


def test_bf16_can_be_forced():
    assert training.bf16_ok("on") is True and training.bf16_ok("off") is False


@pytest.mark.parametrize("agent_id, module", [("ref-sft", "sft"), ("ref-grpo", "grpo"),
                                               ("ref-l3-sft", "l3_sft"), ("ref-l3-rl", "l3_rl")])
def test_each_agent_reads_its_params_as_its_record(agent_id, module):
    """An agent's Params record names exactly the params its spec declares (the spec keeps the
    defaults), so the record is built from the declared defaults alone."""
    import dataclasses
    import importlib
    cls = importlib.import_module(f"a2c.agents.reference.{module}").Params
    assert {f.name for f in dataclasses.fields(cls)} == set(_declared(agent_id))
    values = params.typed(agent_id, cls)
    assert dataclasses.asdict(values) == params.params(agent_id)


def test_a_record_the_spec_does_not_match_fails_at_the_start(monkeypatch, tmp_path):
    manifest = {"id": "ref-sft", "agent": {"params": {
        "steps": {"type": "integer", "default": 3, "description": "."}}}}
    (tmp_path / "agent.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("A2C_AGENT_DIR", str(tmp_path))
    from a2c.agents.reference import sft
    with pytest.raises(TypeError):
        params.typed("ref-sft", sft.Params)
