"""docs/architecture.md lists every module with its docstring's line (generated), and explains
every module over 400 lines and every function over 80 (hand-written reasons)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("gen_architecture",
                                                  ROOT / "scripts" / "gen_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load()
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
FIX = "run: python scripts/gen_architecture.py --write"


def test_every_module_is_listed():
    missing = sorted(set(gen.modules()) - set(gen.listed_modules(DOC)))
    assert not missing, f"docs/architecture.md does not list {missing}; {FIX}"


def test_no_listed_module_is_gone():
    gone = sorted(set(gen.listed_modules(DOC)) - set(gen.modules()))
    assert not gone, f"docs/architecture.md lists modules that no longer exist: {gone}; {FIX}"


def test_the_list_is_the_generated_one():
    assert gen.render(DOC) == DOC, f"docs/architecture.md's module list is stale; {FIX}"


def test_every_long_module_and_function_is_explained():
    reasons = gen.explained(DOC)
    unexplained = sorted(set(gen.long_ones()) - set(reasons))
    assert not unexplained, (
        f"over {gen.MAX_MODULE_LINES} lines (module) or {gen.MAX_FUNCTION_LINES} (function) "
        f"without a line in docs/architecture.md '{gen.LONG_HEADING}': {unexplained}")
    assert all(reasons.values())


def test_no_explanation_is_stale():
    stale = sorted(set(gen.explained(DOC)) - set(gen.long_ones()))
    assert not stale, f"no longer over the limit, remove from '{gen.LONG_HEADING}': {stale}"


def test_the_generator_finds_modules_missing_and_gone(tmp_path):
    block = DOC.split(gen.BEGIN, 1)[1].split(gen.END, 1)[0]
    first = gen.listed_modules(DOC)[0]
    doctored = DOC.replace(f"- `{first}` — ", "- `a2c/no_such_module.py` — ", 1)
    assert first not in gen.listed_modules(doctored)
    assert "a2c/no_such_module.py" in gen.listed_modules(doctored)
    assert gen.render(doctored) == DOC
    assert block.strip()


def test_every_module_has_a_group_and_missing_markers_are_an_error():
    assert all(gen.group_of(m) for m in gen.modules())
    with pytest.raises(ValueError, match="markers"):
        gen.render("# Architecture\n")


def test_summary_is_the_first_paragraph_cut_at_a_sentence(tmp_path, monkeypatch):
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    (tmp_path / "m.py").write_text('"""First line\nwraps.  Second.\n\nNot this."""\n')
    assert gen.summary("m.py") == "First line wraps. Second."
    (tmp_path / "n.py").write_text("x = 1\n")
    assert gen.summary("n.py") == gen.NO_DOCSTRING
    long = "A sentence that is long enough. " * 20
    (tmp_path / "o.py").write_text(f'"""{long}"""\n')
    assert len(gen.summary("o.py")) <= gen.MAX_SUMMARY
    assert gen.summary("o.py").endswith(".")
