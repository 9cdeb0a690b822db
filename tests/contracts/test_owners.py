"""Every contract-owned file is read through its owner in a2c/contracts (docs/contracts.md).

run.json (`run_info`), events.jsonl (`events`), submissions.jsonl (`journal`), results/<n>.json
(`grade_result`), grader/service.json (`service_config`), bundle.json / agent.json / suite.json
(`bundle`) each have one module that parses them, so a change of format is
made in one place. This test reads the source (ast) of everything outside a2c/contracts and fails
on code that builds the path of such a file by hand (`run_dir / "run.json"`,
`Path("events.jsonl")`, `os.path.join(d, "bundle.json")`) or parses one itself
(`json.loads(paths.run_json.read_text())`, `open(paths.events)`, `paths.results.glob(...)`),
naming file:line. `RunPaths` (a2c/contracts/run_paths.py) is the way to the paths; the owners'
readers are the way to the contents.

`ALLOWED` names the few places that must handle the files as bytes and say why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import a2c
import a2c.agents
import a2c.analysis
import a2c.compiler
import a2c.runtime

PACKAGE = Path(a2c.__file__).resolve().parent
ROOTS = {
    "a2c": PACKAGE,
    "compiler": Path(a2c.compiler.__file__).resolve().parent,
    "runtime": Path(a2c.runtime.__file__).resolve().parent,
    "analysis": Path(a2c.analysis.__file__).resolve().parent,
    "agents": Path(a2c.agents.__file__).resolve().parent,
}
CONTRACTS = PACKAGE / "contracts"
OWNED_NAMES = ("run.json", "events.jsonl", "submissions.jsonl", "service.json", "bundle.json",
               "agent.json", "suite.json", "results")
# RunPaths' names for the owned files: a parse of one of these is a parse outside its owner.
OWNED_ATTRS = ("run_json", "events", "journal", "service_json", "agent_manifest",
               "bundle_manifest", "results", "result", "baseline_result", "final_result")
PATH_CALLS = ("Path", "PurePath", "open", "join", "joinpath", "glob", "rglob")
PARSE_CALLS = ("loads", "load", "open", "read_text", "read_bytes", "read_json",
               "read_jsonl_tolerant", "glob", "rglob", "iterdir")

# (source path, the owned name or RunPaths attribute): why it may (none needs to today).
ALLOWED: dict[tuple[str, str], str] = {}
# Hand-made reads still to move onto the owners (issue 26), in files other work owned at the
# time; each entry goes when its file is fixed (the test says when one is no longer needed).
PENDING: dict[tuple[str, str], str] = {
}


def _owned_name(value: str) -> str | None:
    """The owned file a path string names (its last part), or None."""
    last = value.rstrip("/").rsplit("/", 1)[-1]
    if last in OWNED_NAMES:
        return last
    if value.startswith("results/") and value.endswith(".json"):
        return "results"
    return None


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _owned_attr(node: ast.AST) -> str | None:
    """The RunPaths name an expression reads (`paths.run_json`, `paths.result(n)`), if any."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in OWNED_ATTRS:
            return sub.attr
    return None


def _findings(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, owned name, what) for every hand-built path or parse of an owned file."""
    out: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) \
                and isinstance(node.right, ast.Constant) and isinstance(node.right.value, str):
            name = _owned_name(node.right.value)
            if name:
                out.append((node.lineno, name, f"path joined by hand: / {node.right.value!r}"))
        elif isinstance(node, ast.Call):
            call = _call_name(node)
            if call in PATH_CALLS:
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        name = _owned_name(arg.value)
                        if name:
                            out.append((node.lineno, name, f"{call}({arg.value!r})"))
            if call in PARSE_CALLS:
                target = node.func.value if isinstance(node.func, ast.Attribute) \
                    and call in ("read_text", "read_bytes", "glob", "rglob", "iterdir") else None
                scope = [target] if target is not None else list(node.args)
                for expr in scope:
                    attr = _owned_attr(expr) if expr is not None else None
                    if attr:
                        out.append((node.lineno, attr, f"{call}() of RunPaths.{attr}"))
                        break
    return out


def _sources():
    for area, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            if path.is_relative_to(CONTRACTS):
                continue
            if area == "a2c" and any(path.is_relative_to(r) for a, r in ROOTS.items()
                                     if a != "a2c"):
                continue
            rel = path.relative_to(root).as_posix()
            yield f"{area}/{rel}", path


def test_contract_files_are_read_through_their_owners():
    found = []
    used = set()
    for rel, path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name, what in _findings(tree):
            if (rel, name) in ALLOWED or (rel, name) in PENDING:
                used.add((rel, name))
                continue
            found.append(f"{rel}:{line}: {what} (read {name} through its owner in a2c/contracts)")
    assert not found, "contract-owned files handled outside their owner:\n  " + \
        "\n  ".join(sorted(set(found)))
    stale = (set(ALLOWED) | set(PENDING)) - used
    assert not stale, f"allowed but no longer needed (remove them here): {sorted(stale)}"


def test_the_scan_sees_a_hand_built_path_and_a_raw_parse():
    code = ("import json\n"
            "a = run_dir / 'run.json'\n"
            "b = json.loads(paths.run_json.read_text())\n"
            "c = [p for p in paths.results.glob('*.json')]\n"
            "d = open(os.path.join(root, 'events.jsonl'))\n"
            "e = f'{paths.run_json}: not JSON'\n"
            "msg = 'events.jsonl:3: broken'\n")
    found = {(line, name) for line, name, _ in _findings(ast.parse(code))}
    assert found == {(2, "run.json"), (3, "run_json"), (4, "results"), (5, "events.jsonl")}
