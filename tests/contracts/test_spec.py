"""The typed resolved specs (a2c.contracts.spec) read every compiled bundle and write it back
unchanged, so typing a manifest's body never moves a digest."""

from __future__ import annotations

import json

from a2c.contracts.bundle import BundleManifest, load_bundle
from a2c.contracts.spec import SPEC_CLASSES, AgentSpec, BudgetSpec, SpecRecord, TaskSpec
from a2c.paths import project_root


def _manifests():
    generated = project_root() / "generated"
    return [*generated.glob("*/bundle.json"), *generated.glob("agents/*/agent.json"),
            *generated.glob("suites/*/suite.json")]


def _unknown(record, where=""):
    """Every key a spec record did not know (kept in `extra`), by where it was."""
    out = []
    if isinstance(record, SpecRecord):
        out += [f"{where}.{k}" for k in record.extra]
        for f in record.fields_of():
            out += _unknown(getattr(record, f.name), f"{where}.{f.name}")
    elif isinstance(record, list):
        for i, v in enumerate(record):
            out += _unknown(v, f"{where}[{i}]")
    elif isinstance(record, dict):
        for k, v in record.items():
            out += _unknown(v, f"{where}[{k}]")
    return out


def test_every_compiled_spec_round_trips_and_every_key_is_typed():
    paths = _manifests()
    assert paths
    for path in paths:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        body = manifest[manifest["kind"].lower()]
        spec = SPEC_CLASSES[manifest["kind"]].from_dict(body)
        assert spec.to_dict() == body, path
        assert _unknown(spec) == [], path
        assert BundleManifest.from_dict(manifest).to_dict() == manifest, path


def test_typed_fields_read_the_resolved_values():
    bundle = load_bundle(project_root() / "generated" / "gsm8k")
    task = bundle.task
    assert isinstance(task, TaskSpec) and task.id == "gsm8k"
    assert task.budget.wall_clock_s == bundle.manifest["task"]["budget"]["wall_clock_s"]
    assert task.grader.kind == bundle.manifest["task"]["grader"]["kind"]
    assert task.scoring.policy == "best" and task.scoring.final is None


def test_keys_written_only_when_set_stay_out_and_unknown_keys_are_kept():
    assert "driver_tokens" not in BudgetSpec().to_dict()
    assert BudgetSpec(driver_tokens=5).to_dict()["driver_tokens"] == 5
    assert "params" not in AgentSpec(id="a").to_dict()
    odd = {"id": "t", "future_key": {"x": 1}, "budget": {"wall_clock_s": 60, "new": True}}
    spec = TaskSpec.from_dict(odd)
    assert spec.budget.wall_clock_s == 60 and spec.to_dict() == odd
