"""Agent params in the compiler (issue 26.4): the schema and the checks refuse a declaration whose
default does not fit it, the bundle carries the declarations (in its digest), an agent without
params compiles as before, and `a2c.contracts.agent_params` types a run's values one way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from a2c.compiler.build import plan
from a2c.contracts import agent_params as ap
from a2c.errors import SpecError

REPO = Path(__file__).resolve().parents[2]
HEAD = ("apiVersion: a2c/v1\nkind: Agent\nid: {id}\ntitle: T\ntype: reference\n"
        "launch: {{command: python -m x}}\ndriver: {{required: false}}\n")


@pytest.fixture
def agent_spec(tmp_path):
    folder = tmp_path / "specs" / "agents"
    folder.mkdir(parents=True)

    def write(params: str, ident: str = "a") -> Path:
        path = folder / f"{ident}.yaml"
        path.write_text(HEAD.format(id=ident) + params)
        return path
    return write


def _manifest(path: Path) -> dict:
    (art,) = plan([path])
    return json.loads(art.files["agent.json"])


def _problems(path: Path) -> list[str]:
    with pytest.raises(SpecError) as exc:
        plan([path])
    return exc.value.problems


def test_the_bundle_carries_the_declarations_and_they_change_the_digest(agent_spec):
    path = agent_spec("params:\n  steps: {type: integer, default: 25, minimum: 1, "
                      "description: Steps.}\n  lr: {type: number, default: 1, description: LR.}\n")
    manifest = _manifest(path)
    assert manifest["agent"]["params"] == {
        "lr": {"type": "number", "default": 1.0, "description": "LR."},
        "steps": {"type": "integer", "default": 25, "description": "Steps.", "minimum": 1}}
    other = agent_spec("params:\n  steps: {type: integer, default: 20, minimum: 1, "
                       "description: Steps.}\n  lr: {type: number, default: 1, description: LR.}\n")
    assert _manifest(other)["digest"] != manifest["digest"]


def test_an_agent_without_params_compiles_as_before():
    manifest = _manifest(REPO / "specs" / "agents" / "codex.yaml")
    assert "params" not in manifest["agent"]
    shipped = json.loads((REPO / "generated" / "agents" / "codex" / "agent.json").read_text())
    assert manifest["digest"] == shipped["digest"]


@pytest.mark.parametrize("params, message", [
    ("  lr: {type: number, default: 5e-05, description: x}\n",
     "params.lr: param lr: default lr='5e-05': not a valid number"),
    ("  steps: {type: integer, default: 0, minimum: 1, description: x}\n",
     "params.steps: param steps: default steps=0: at least 1"),
    ("  mode: {type: string, default: fast, enum: [slow, medium], description: x}\n",
     "params.mode: param mode: default mode='fast': one of slow, medium"),
    ("  flag: {type: boolean, default: 1, description: x}\n",
     "params.flag: param flag: default flag=1: not a valid boolean"),
    ("  bf16: {type: string, default: auto, enum: [auto, on], description: x}\n",
     "param bf16: enum value True is not a string"),
    ("  name: {type: string, default: a, minimum: 1, description: x}\n",
     "minimum/maximum apply to integer and number params"),
    ("  steps: {type: integer, default: 2, minimum: 3, maximum: 1, description: x}\n",
     "minimum 3 is above maximum 1"),
])
def test_a_default_must_fit_its_declaration(agent_spec, params, message):
    problems = _problems(agent_spec("params:\n" + params))
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize("params, message", [
    ("  Steps: {type: integer, default: 1, description: x}\n", "snake_case"),
    ("  steps: {type: integer, default: 1}\n", "description"),
    ("  steps: {type: int, default: 1, description: x}\n", "type"),
])
def test_the_schema_checks_names_and_fields(agent_spec, params, message):
    problems = _problems(agent_spec("params:\n" + params))
    assert any(message in p and "params" in p for p in problems), problems


def test_the_reference_agents_declare_documented_params():
    for ident in ("ref-sft", "ref-grpo", "ref-l3-sft", "ref-l3-rl"):
        params = _manifest(REPO / "specs" / "agents" / f"{ident}.yaml")["agent"]["params"]
        assert params and all(p["description"] for p in params.values()), ident
    assert "params" not in _manifest(REPO / "specs" / "agents" / "ref-copy.yaml")["agent"]


# ------------------------------------------------------------------ a2c.contracts.agent_params
AGENT = {"id": "x", "params": {
    "steps": {"type": "integer", "default": 25, "minimum": 1, "description": "."},
    "lr": {"type": "number", "default": 5e-5, "description": "."},
    "warmup": {"type": "boolean", "default": True, "description": "."},
    "bf16": {"type": "string", "default": "auto", "enum": ["auto", "on", "off"],
             "description": "."}}}


def test_effective_types_strings_and_fills_the_defaults():
    values = ap.effective(AGENT, {"steps": "10", "lr": "1e-4", "warmup": "false"})
    assert values == {"bf16": "auto", "lr": 1e-4, "steps": 10, "warmup": False}
    assert ap.effective(AGENT, {"steps": 10.0, "lr": 1})["lr"] == 1.0
    assert ap.effective({"id": "y"}, {}) == {}


@pytest.mark.parametrize("given, message", [
    ({"stepz": 1}, "agent x has no param stepz (its params: bf16, lr, steps, warmup"),
    ({"steps": "1.5"}, "steps='1.5': not a valid integer"),
    ({"steps": True}, "not a valid integer"),
    ({"bf16": "fast"}, "bf16='fast': one of auto, on, off"),
    ({"warmup": "maybe"}, "not a valid boolean"),
])
def test_effective_refuses_with_exit_2(given, message):
    with pytest.raises(ap.AgentParamError) as exc:
        ap.effective(AGENT, given)
    assert message in str(exc.value) and exc.value.exit_code == 2


def test_assignments_and_the_variable_round_trip():
    assert ap.parse_assignments(["steps=10", "lr = 1e-4", "steps=12"]) == {"steps": "12",
                                                                           "lr": "1e-4"}
    with pytest.raises(ap.AgentParamError, match="NAME=VALUE"):
        ap.parse_assignments(["steps"])
    values = ap.effective(AGENT, {"steps": "3"})
    assert ap.from_env(ap.to_env(values)) == values and ap.from_env("") == {}


def test_shipped_specs_validate(tmp_path):
    shutil.copytree(REPO / "specs", tmp_path / "specs")
    for ident in ("ref-sft", "ref-grpo", "ref-l3-sft", "ref-l3-rl"):
        _manifest(tmp_path / "specs" / "agents" / f"{ident}.yaml")
