"""The `nox -s bundles` checks: Dockerfile parses and is pinned, client --help, instructions."""

from __future__ import annotations

from a2c.compiler import bundlecheck
from a2c.compiler.build import build_specs
from a2c.compiler.load import load_spec
from a2c.contracts.spec import TaskSpec


def test_built_bundle_passes(specs, tmp_path):
    (root,) = build_specs([specs / "tasks" / "tiny.yaml"], tmp_path / "out")
    assert bundlecheck.check_dockerfile(root / "Dockerfile") == []
    assert bundlecheck.check_instructions(root, TaskSpec.from_dict(load_spec(specs / "tasks" / "tiny.yaml"))) == []
    if (root / "workspace" / "a2c_client.py").exists():
        assert bundlecheck.check_client(root) == []


def test_dockerfile_problems_are_found(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.11-slim\nCOPY grader/ /g/\nRUN true\n")
    problems = bundlecheck.check_dockerfile(bad)
    assert any("pinned by digest" in p for p in problems)
    assert any("non-root" in p for p in problems)
    assert any("grader-private" in p for p in problems)


def test_instructions_must_state_budget(specs, tmp_path):
    (root,) = build_specs([specs / "tasks" / "tiny.yaml"], tmp_path / "out")
    path = root / "workspace" / "INSTRUCTIONS.md"
    path.write_text(path.read_text().replace("1h30m", "a while"))
    problems = bundlecheck.check_instructions(root, TaskSpec.from_dict(load_spec(specs / "tasks" / "tiny.yaml")))
    assert any("wall clock" in p for p in problems)
