"""No import cycles among a2c's own modules (issue 33).

The graph is built statically with `ast`, from every `.py` file of the installed packages
(`a2c`, `a2c.compiler`, `a2c.runtime`, `a2c.analysis`, `a2c.agents`): an edge A -> B for every
`import B` and `from B import x` in A, absolute or relative, **at any level**: module level,
inside a function (a deferred import still ties A to B: it only moves the cycle to run time), and
under `if TYPE_CHECKING:` (a type-only import is still a dependency of the design). Dynamic
imports (`importlib.import_module(name)`) are not edges. `from pkg import name` is an edge to
`pkg.name` where that is a module, else to `pkg` (its `__init__`); importing `a.b.c` is an edge to
`a.b.c` only, not to the parent packages whose `__init__` Python also runs.

A cycle is a strongly connected component of more than one module; each is printed with the
edges that close it. Break one along its seam (move the shared piece down, or into a small module
of its own), never by hiding an import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import a2c
import a2c.agents
import a2c.analysis
import a2c.compiler
import a2c.runtime

ROOTS = {"a2c": Path(a2c.__file__).resolve().parent,
         "a2c.compiler": Path(a2c.compiler.__file__).resolve().parent,
         "a2c.runtime": Path(a2c.runtime.__file__).resolve().parent,
         "a2c.analysis": Path(a2c.analysis.__file__).resolve().parent,
         "a2c.agents": Path(a2c.agents.__file__).resolve().parent}


def modules() -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package's __init__)} for every module of the packages."""
    out = {}
    for prefix, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            package = parts[-1] == "__init__"
            name = ".".join([prefix] + (parts[:-1] if package else parts))
            out.setdefault(name, (path, package))
    return out


def import_graph() -> dict[str, set[str]]:
    """{module: the a2c modules it imports, at any level}."""
    mods = modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, package) in mods.items():
        here = name if package else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                edges |= {t for a in node.names if (t := known(a.name))}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[:len(here.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                edges |= {t for a in node.names if (t := known(f"{module}.{a.name}"))}
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    inside = set(component)
    return "\n".join([f"cycle of {len(component)}:"] + [
        f"  {m} -> {', '.join(sorted(graph[m] & inside))}" for m in component])


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    assert "a2c.settings" in graph and "a2c.cli.run" in graph
    assert "a2c.runtime.run.prepare" in graph
    assert "a2c.runtime.preflight" in graph["a2c.cli.doctor"]   # inside a function
    assert "a2c.contracts.schemas.generate" in graph["a2c.contracts.schemas"]   # relative


def test_cycles_finds_a_cycle():
    toy = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(toy) == [["a", "b", "c"]]


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    for component in found:
        print(describe(graph, component))
    assert not found, "\n" + "\n\n".join(describe(graph, c) for c in found)
