"""A spec written for a2c 0.1.0 still compiles: a renamed field (compiler/renamed.py) is read under
its new name, with a deprecation warning that says where; both names at once are refused."""

from __future__ import annotations

import json
import warnings

import pytest

from a2c.compiler.build import plan
from a2c.compiler.load import load_spec
from a2c.errors import SpecDeprecationWarning, SpecError


def _tiny(specs, inference: str):
    """tiny.yaml with its grader's `inference` line(s) replaced (from the fixture's text)."""
    spec = specs / "tasks" / "tiny.yaml"
    original = specs.parent / "tiny.yaml.orig"
    if not original.exists():
        original.write_text(spec.read_text())
    text = original.read_text()
    old = "  inference: {max_new_tokens: 16, temperature: 0}\n"
    assert old in text
    spec.write_text(text.replace(old, inference))
    return spec


def test_inference_backend_compiles_as_engine_with_a_warning(specs):
    spec = _tiny(specs, "  inference:\n    backend: transformers\n    max_new_tokens: 16\n")
    with pytest.warns(SpecDeprecationWarning, match=r"tiny\.yaml:18:\d+: "
                      r"grader\.inference\.backend: deprecated name \(renamed to `engine`"):
        task = load_spec(spec)
    assert task["grader"]["inference"]["engine"] == "transformers"
    assert "backend" not in task["grader"]["inference"]


def test_the_bundle_of_an_old_spec_equals_the_new_ones(specs):
    old = _tiny(specs, "  inference: {backend: vllm, max_new_tokens: 16}\n")
    with pytest.warns(SpecDeprecationWarning):
        before = plan([old])[0].files["bundle.json"]
    new = _tiny(specs, "  inference: {engine: vllm, max_new_tokens: 16}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = plan([new])[0].files["bundle.json"]
    assert before == after
    assert json.loads(after)["task"]["grader"]["inference"]["engine"] == "vllm"


def test_a_wrong_value_under_the_old_name_points_at_its_line(specs):
    spec = _tiny(specs, "  inference:\n    max_new_tokens: 16\n    backend: tpu\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    (problem,) = err.value.problems
    assert ":19:" in problem and "grader.inference.engine" in problem and "tpu" in problem


def test_both_names_are_refused(specs):
    spec = _tiny(specs, "  inference: {backend: vllm, engine: transformers}\n")
    with pytest.raises(SpecError, match=r"grader\.inference\.backend: the old name of `engine`, "
                                        r"which is given too"):
        load_spec(spec)


def test_the_old_name_in_a_base_spec(specs):
    base = specs / "base" / "defaults.yaml"
    text = base.read_text()
    base.write_text(text.replace("inference: {max_new_tokens: 8, temperature: 0}",
                                 "inference: {max_new_tokens: 8, temperature: 0, "
                                 "backend: transformers}"))
    users = [p for p in (specs / "tasks").glob("*.yaml") if "defaults.yaml" in p.read_text()]
    assert users, "a fixture task extends base/defaults.yaml"
    with pytest.warns(SpecDeprecationWarning, match="defaults.yaml"):
        task = load_spec(users[0])
    assert task["grader"]["inference"]["engine"] == "transformers"


def test_the_cli_prints_the_deprecation_as_one_line(specs, run_cli, tmp_path):
    spec = _tiny(specs, "  inference: {backend: vllm, max_new_tokens: 16}\n")
    code, _out, err = run_cli("build", spec, "-o", tmp_path / "out")
    assert code == 0, err
    assert err.strip().startswith("a2c build: warning: ")
    assert "tiny.yaml:17:15: grader.inference.backend: deprecated name" in err
    assert len(err.strip().splitlines()) == 1
