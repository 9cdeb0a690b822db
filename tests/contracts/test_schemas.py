"""The committed JSON Schemas equal the ones generated from the record classes, and real records
(a run written by the fixture maker, the compiled bundles) validate against them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from a2c.contracts.schemas import SCHEMA_DIR, generate_all, load_schema
from a2c.contracts.schemas.__main__ import main as schemas_main
from a2c.contracts.schemas.generate import render
from a2c.paths import project_root

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "runs"))
from make_fixture_run import make_run  # noqa: E402


def test_committed_schemas_equal_generated():
    generated = generate_all()
    committed = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert committed == sorted(f"{name}.schema.json" for name in generated)
    for name, schema in generated.items():
        Draft202012Validator.check_schema(schema)
        assert (SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8") == render(schema)
    assert schemas_main(["--check"]) == 0


def _errors(schema_name: str, obj) -> list[str]:
    validator = Draft202012Validator(load_schema(schema_name))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("runs") / "run")


def test_fixture_run_records_validate(fixture_run):
    for line in (fixture_run / "events.jsonl").read_text().splitlines():
        assert _errors("event", json.loads(line)) == []
    for line in (fixture_run / "submissions.jsonl").read_text().splitlines():
        assert _errors("journal_entry", json.loads(line)) == []
    for path in sorted((fixture_run / "results").glob("*.json")):
        assert _errors("grade_result", json.loads(path.read_text())) == [], path
    assert _errors("bundle", json.loads((fixture_run / "bundle" / "bundle.json").read_text())) == []


def test_compiled_bundles_validate():
    generated = project_root() / "generated"
    manifests = [*generated.glob("*/bundle.json"), *generated.glob("agents/*/agent.json"),
                 *generated.glob("suites/*/suite.json")]
    assert manifests
    for path in manifests:
        assert _errors("bundle", json.loads(path.read_text())) == [], path


def test_a_wrong_type_is_caught():
    event = {"seq": 0, "ts": "t", "type": "submission_scored", "prev": "0" * 64, "hash": "h",
             "data": {"id": 1, "valid": "yes", "copy_of_base": "no"}}
    errors = _errors("event", event)
    assert any("valid" in e for e in errors) and any("copy_of_base" in e for e in errors)
    assert _errors("journal_entry", {"op": "scored", "id": 1, "code": 3})
