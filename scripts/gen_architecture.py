"""docs/architecture.md's module list, generated from the modules' docstrings, and the list of
long modules and functions that the doc must explain.

Why generated: the hand-kept list drifted (39 modules, the whole driver gateway among them, were
missing). Now each module's first docstring paragraph is its line, so "where does X live" is
answered by the module itself, and tests/test_architecture_doc.py fails when the doc is stale.

    python scripts/gen_architecture.py            # print the generated module list
    python scripts/gen_architecture.py --write    # rewrite it in docs/architecture.md
    python scripts/gen_architecture.py --check    # exit 1 when the doc is stale
    python scripts/gen_architecture.py --long     # modules > 400 lines, functions > 80 lines,
                                                  # and which of them the doc does not explain

Only the part between the BEGIN/END markers is rewritten; the prose around it is hand-written.
Standard library only (ast), so it runs without the project installed.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- BEGIN GENERATED module list: python scripts/gen_architecture.py --write -->"
END = "<!-- END GENERATED module list -->"
LONG_HEADING = "## Long modules and functions, and why"
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 80
AREAS = ("a2c", "compiler", "runtime", "agents", "analysis", "templates", "specs")
NO_DOCSTRING = "*(no docstring)*"
MAX_SUMMARY = 240

# (folder, heading level, title): a module belongs to the deepest folder listed that holds it.
GROUPS = (
    ("a2c", 3, "`a2c/` — shared helpers (the bottom layer)"),
    ("a2c/contracts", 3, "`a2c/contracts/` — the typed records passed between the areas"),
    ("a2c/cli", 3, "`a2c/cli/` — the one command line"),
    ("a2c/sweep", 3, "`a2c/sweep/` — a suite's trials on Ray (contracts only; Ray imported lazily)"),
    ("a2c/wires", 3, "`a2c/wires/` — the four driver wire formats, one class each (bottom layer)"),
    ("compiler", 3, "`compiler/` (`a2c.compiler`) — specs to bundles"),
    ("runtime", 3, "`runtime/` (`a2c.runtime`) — running a bundle"),
    ("runtime/run", 4, "`runtime/run/` — one run"),
    ("runtime/check", 4, "`runtime/check/` — `a2c check`: proving an authored task"),
    ("runtime/grader_service", 4, "`runtime/grader_service/` — the grader service (its own process)"),
    ("runtime/driver_gateway", 4,
     "`runtime/driver_gateway/` — the agent's one way to its driver model (metered, recorded)"),
    ("runtime/env_services", 4, "`runtime/env_services/` — the task's environment services"),
    ("runtime/sandbox", 4, "`runtime/sandbox/` — where the agent runs"),
    ("runtime/graders", 4, "`runtime/graders/` — scoring a model"),
    ("runtime/inference", 4, "`runtime/inference/` — generating with a model"),
    ("runtime/data", 4, "`runtime/data/` — task data"),
    ("runtime/envs", 4, "`runtime/envs/` — level 3: environments"),
    ("agents", 3, "`agents/` (`a2c.agents`) — a2c's own agents, beside the runtime (started by "
     "module name, never imported by it)"),
    ("agents/kit", 4, "`agents/kit/` — what every reference agent uses"),
    ("agents/reference", 4, "`agents/reference/` — the scripted reference agents"),
    ("agents/scripted_driver", 4,
     "`agents/scripted_driver/` — a scripted upstream for the gateway (tests, demos, offline)"),
    ("analysis", 3, "`analysis/` (`a2c.analysis`) — records to reports"),
    ("templates", 3, "`templates/`, `specs/` — package data (Jinja templates, built-in specs)"),
    ("specs", 3, ""),
)


def in_package(path: Path, area: Path) -> bool:
    """Whether `path` is a module of the project: every folder from its area down to it holds an
    `__init__.py`. A Python file in a folder that is no package is an author's file kept in the
    tree, not the project's code: a task's data script beside its data
    (`specs/tasks/data/<task>/make_data.py`, docs/authoring.md) is neither listed nor measured."""
    folder = path.parent
    while True:
        if not (folder / "__init__.py").is_file():
            return False
        if folder == area:
            return True
        folder = folder.parent


def modules() -> list[str]:
    """Every Python module of the areas (files in packages only: in_package), as repository
    paths."""
    found = []
    for area in AREAS:
        for path in (ROOT / area).rglob("*.py"):
            if "__pycache__" not in path.parts and in_package(path, ROOT / area):
                found.append(path.relative_to(ROOT).as_posix())
    return sorted(found)


def group_of(module: str) -> str:
    folder = module.rsplit("/", 1)[0] if "/" in module else ""
    best = ""
    for name, _, _ in GROUPS:
        if (folder == name or folder.startswith(name + "/")) and len(name) > len(best):
            best = name
    if not best:
        raise ValueError(f"{module}: no group in scripts/gen_architecture.py GROUPS holds it")
    return best


def summary(module: str) -> str:
    """The docstring's first paragraph on one line, cut after the last whole sentence within
    MAX_SUMMARY characters (never shorter than its first sentence); NO_DOCSTRING when none."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    first = " ".join(doc.strip().split("\n\n", 1)[0].split())
    if not first:
        return NO_DOCSTRING
    sentences = re.split(r"(?<=\.)\s+(?=[A-Z`(])", first)
    kept = sentences[0]
    for sentence in sentences[1:]:
        if len(kept) + 1 + len(sentence) > MAX_SUMMARY:
            break
        kept += " " + sentence
    return kept


def _order(module: str) -> tuple:
    # __init__ first, then by name; nested packages (runtime/envs/<kind>/) after their parent's files
    parts = module.split("/")
    return (len(parts), parts[:-1], parts[-1] != "__init__.py", parts[-1])


def module_list() -> str:
    by_group: dict[str, list[str]] = {}
    for module in modules():
        by_group.setdefault(group_of(module), []).append(module)
    lines = []
    for name, level, title in GROUPS:
        members = sorted(by_group.get(name, []), key=_order)
        if not members:
            continue
        if title:
            lines += ["", f"{'#' * level} {title}"]
        lines += [f"- `{m}` — {summary(m)}" for m in members]
    return "\n".join(lines).strip("\n")


def render(doc: str) -> str:
    """`doc` with its generated block replaced by the current one."""
    if BEGIN not in doc or END not in doc:
        raise ValueError(f"{DOC}: the markers {BEGIN!r} / {END!r} are missing")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{module_list()}\n{END}{tail}"


def listed_modules(doc: str) -> list[str]:
    """The modules the generated block lists."""
    block = doc.split(BEGIN, 1)[1].split(END, 1)[0]
    return re.findall(r"^- `([^`]+\.py)` — ", block, flags=re.M)


# ------------------------------------------------------------------------- long modules, functions
def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node.end_lineno - node.lineno + 1
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")


def long_ones() -> dict[str, int]:
    """`path` → lines for modules over the limit, `path::qualname` → lines for functions over it
    (a function counts from its `def` to its last line, nested functions included)."""
    found = {}
    for module in modules():
        text = (ROOT / module).read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found[module] = len(text.splitlines())
        for name, lines in _functions(ast.parse(text)):
            if lines > MAX_FUNCTION_LINES:
                found[f"{module}::{name}"] = lines
    return found


def explained(doc: str) -> dict[str, str]:
    """The entries of the "Long modules and functions, and why" section: name → reason."""
    if LONG_HEADING not in doc:
        return {}
    section = doc.split(LONG_HEADING, 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^- `([^`]+)`[^—\n]*— (.+)$", section, flags=re.M)}


def main(argv: list[str]) -> int:
    doc = DOC.read_text(encoding="utf-8")
    if "--write" in argv:
        DOC.write_text(render(doc), encoding="utf-8")
    elif "--check" in argv:
        if render(doc) != doc:
            print(f"{DOC} is stale: python scripts/gen_architecture.py --write", file=sys.stderr)
            return 1
    elif "--long" in argv:
        reasons = explained(doc)
        for name, lines in sorted(long_ones().items(), key=lambda kv: -kv[1]):
            print(f"{lines:5d}  {name}  {'— ' + reasons[name] if name in reasons else 'UNEXPLAINED'}")
    else:
        print(module_list())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
