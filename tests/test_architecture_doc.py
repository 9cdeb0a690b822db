"""docs/architecture.md lists every module with its docstring's line (generated), and explains
every module over 400 lines and every function over 80 (hand-written reasons)."""

from __future__ import annotations

import ast
import importlib.util
import re
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


def test_an_authors_data_script_beside_the_task_data_keeps_the_doc_check_green(tmp_path,
                                                                                monkeypatch):
    """Issue 31: a task's data script where docs/authoring.md puts it
    (specs/tasks/data/<task>/make_data.py) is the author's file, not a project module: the doc's
    checks give the verdict they give without it, even when it is long, and the generator never
    asks to list it. The tree is this checkout's (its areas linked, specs/ copied) plus the
    planted script."""
    import shutil
    for area in gen.AREAS:
        if area != "specs":
            (tmp_path / area).symlink_to(ROOT / area, target_is_directory=True)
    shutil.copytree(ROOT / "specs", tmp_path / "specs",
                    ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "specs" / "tasks" / "data" / "capitals" / "make_data.py"
    script.parent.mkdir(parents=True)
    body = "\n".join(f"    rows.append({{'id': 'c{i}'}})" for i in range(450))
    script.write_text('"""Write train.jsonl and test.jsonl for the capitals task."""\n\n'
                      f"def main():\n    rows = []\n{body}\n    return rows\n", encoding="utf-8")
    (tmp_path / "specs" / "tasks" / "data" / "gsm8k-mini.py").write_text("x = 1\n")
    real = gen.modules(), gen.module_list(), gen.long_ones()
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    # each check above gives the same verdict with the script as without it: nothing new to
    # list (the generated block is the same text), nor to explain, long as the script is
    assert gen.modules() == real[0]
    assert gen.module_list() == real[1]
    assert gen.long_ones() == real[2]
    assert not [m for m in gen.modules() if m.startswith("specs/tasks/")]
    assert not gen.in_package(script, tmp_path / "specs")
    assert gen.in_package(tmp_path / "specs" / "__init__.py", tmp_path / "specs")


# ------------------------------------------------------------------------- "Where does X live"
WHERE_HEADING = "## Where does X live"
# a backticked repository path (a file or a folder/), optionally `:symbol` or `:Class.member`;
# not a run-time folder (`.a2c/check-runs/`)
NAMED = re.compile(r"`(\w[\w.-]*/(?:[\w.-]+/)*(?:[\w.-]+\.\w+)?)(?::([\w.]+))?`")
WHERE_ROWS = ("the grading API", "budget: the run's limits", "budget: wall clock",
              "budget: evaluation time", "budget: driver tokens, cost, calls",
              "budget: GPUs", "budget: disk", "budget: memory, CPUs, processes",
              "budget: submissions", "the sandbox argv", "prices", "the trajectory builder",
              "suite expansion", "signing keys", "provenance", "compliance evidence",
              "contamination")


def _where_section(doc: str) -> str:
    assert WHERE_HEADING in doc, f"docs/architecture.md has no '{WHERE_HEADING}' section"
    return doc.split(WHERE_HEADING, 1)[1].split("\n## ", 1)[0]


def _defined(path: Path, symbol: str) -> bool:
    """Whether `symbol` (`name` or `Class.member`) is defined at the top of the module (a def,
    a class, an assignment; in a package's __init__.py an import counts: it is the API)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    head, _, member = symbol.partition(".")
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and path.name == "__init__.py":
            names = [a.asname or a.name for a in node.names]
        if head not in names:
            continue
        if not member:
            return True
        return isinstance(node, ast.ClassDef) and any(
            getattr(n, "name", None) == member or
            (isinstance(n, ast.Assign) and any(getattr(t, "id", None) == member
                                               for t in n.targets))
            for n in node.body)
    return False


def test_where_does_x_live_opens_the_doc():
    """The table is the doc's first section, before the data flow."""
    assert DOC.index(WHERE_HEADING) < DOC.index("## Data flow") < DOC.index(gen.BEGIN)


def test_where_does_x_live_has_a_row_per_question():
    rows = [line.split("|")[1].strip() for line in _where_section(DOC).splitlines()
            if line.startswith("| ") and not line.startswith("| X ")]
    missing = [q for q in WHERE_ROWS if not any(r.startswith(q) for r in rows)]
    assert not missing, f"'{WHERE_HEADING}' has no row for {missing}"


def test_where_does_x_live_is_true():
    """Every path the table names exists; every `path:symbol` is defined in that file."""
    section = _where_section(DOC)
    named = NAMED.findall(section)
    assert len(named) > 50
    wrong = []
    for rel, symbol in named:
        path = ROOT / rel
        if not path.exists():
            wrong.append(f"{rel}: no such file or folder")
        elif symbol and not (path.suffix == ".py" and _defined(path, symbol)):
            wrong.append(f"{rel}:{symbol}: not defined there")
    assert not wrong, f"docs/architecture.md '{WHERE_HEADING}' is stale: {wrong}"


def test_where_does_x_live_check_catches_a_stale_name():
    assert _defined(ROOT / "runtime" / "budget.py", "BudgetGuard")
    assert _defined(ROOT / "runtime" / "driver_gateway" / "ledger.py", "Ledger.admit")
    assert not _defined(ROOT / "runtime" / "budget.py", "NoSuchGuard")
    assert not _defined(ROOT / "runtime" / "driver_gateway" / "ledger.py", "Ledger.no_such")
    assert NAMED.findall("`a/b.py:C.d` and `runtime/sandbox/` and `grader.params.x`") == [
        ("a/b.py", "C.d"), ("runtime/sandbox/", "")]


def test_every_budget_limit_names_its_one_enforcer_and_the_table_lists_it():
    """`Budget.ENFORCED_BY`: a `path:symbol` per limit of the run's `Budget`, each defined in its
    file and named in the table, so "where is budget X enforced" has one answer."""
    import dataclasses

    from a2c.contracts.budget import Budget

    limits = [f.name for f in dataclasses.fields(Budget)]
    assert sorted(Budget.ENFORCED_BY) == sorted(limits)
    section = _where_section(DOC)
    wrong = []
    for limit, where in Budget.ENFORCED_BY.items():
        rel, _, symbol = where.partition(":")
        if not (ROOT / rel).is_file() or not _defined(ROOT / rel, symbol):
            wrong.append(f"{limit}: {where} is not defined")
        elif f"`{where}`" not in section:
            wrong.append(f"{limit}: {where} is not in '{WHERE_HEADING}'")
    assert not wrong, wrong
