"""The import closure of a few entry modules inside one package, read from the source, never run.

The agent's view of a2c (view.py) is what its entry modules import, and what those import in
turn, inside a2c: computed from the files' `import` statements (ast), so an import added to an
agent, a new bottom-layer package it uses or a module that moved is picked up at the next
sandbox start, and a module nobody imports stays out. Every import statement counts, also one
inside a function (an agent may reach it at any time). A name is located in the package's
folders without importing anything (`locate`), so computing the view executes no a2c code.

Two things a static reading cannot see are declared by the caller: modules loaded by a computed
name (`importlib.import_module(f"...")`: `dynamic_imports` lists them, so a test can say where
each one's targets are declared), and "shell" packages, whose `__init__.py` the view replaces by
an empty file because the agents need one self-contained submodule, not the package's API (the
grader service's `client.py`); importing a name from a shell package itself is then an error.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


class ClosureError(Exception):
    """An entry module that does not exist, or an import the view could not satisfy."""


@dataclass
class Closure:
    files: dict[str, Path] = field(default_factory=dict)   # module -> its source file
    packages: set[str] = field(default_factory=set)        # those that are packages
    shells: set[str] = field(default_factory=set)          # packages shown with an empty __init__
    dynamic: dict[str, list[int]] = field(default_factory=dict)   # module -> lines computing a name

    def relative_files(self) -> dict[str, Path]:
        """{module: path inside the package tree} (`a2c.runtime.envs.base` -> a2c/runtime/envs/base.py)."""
        out = {}
        for name in self.files:
            parts = name.split(".")
            out[name] = Path(*parts, "__init__.py") if name in self.packages \
                else Path(*parts[:-1], parts[-1] + ".py")
        return out


def locate(name: str, roots: dict[str, Path]) -> tuple[Path, bool] | None:
    """(source file, is a package) of module `name`, from the folders of the top packages
    (`roots`: {"a2c": folder, "a2c.runtime": folder, ...}; the longest prefix wins)."""
    base = max((r for r in roots if name == r or name.startswith(r + ".")), key=len, default=None)
    if base is None:
        return None
    folder = roots[base].joinpath(*name[len(base):].split(".")[1:])
    if (folder / "__init__.py").is_file():
        return folder / "__init__.py", True
    if folder.name and folder.with_name(folder.name + ".py").is_file() and name != base:
        return folder.with_name(folder.name + ".py"), False
    return None


def expand(pattern: str, roots: dict[str, Path]) -> list[str]:
    """The modules a pattern names: a dotted name, where a `*` part stands for every module or
    package of that folder (`a2c.agents.reference.*`, `a2c.runtime.envs.*.kind`)."""
    names = [""]
    for part in pattern.split("."):
        grown = []
        for prefix in names:
            if part != "*":
                grown.append(f"{prefix}.{part}" if prefix else part)
                continue
            found = locate(prefix, roots)
            if not found or not found[1]:
                continue
            for entry in sorted(found[0].parent.iterdir()):
                stem = entry.name[:-3] if entry.name.endswith(".py") else entry.name
                if entry.name == "__init__.py" or not stem.isidentifier():
                    continue
                if entry.suffix == ".py" or (entry / "__init__.py").is_file():
                    grown.append(f"{prefix}.{stem}")
        names = grown
    return [n for n in names if locate(n, roots)]


def _dynamic(node: ast.AST) -> str | None:
    """'' for `import_module(<not a literal>)`, the name for `import_module("a2c.x")`."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__"):
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""


_READ: dict[tuple, tuple] = {}   # (file, its size and time, name, top) -> imports_of's answer


def imports_of(name: str, path: Path, is_package: bool,
               top: str) -> tuple[list[tuple[str, list[str]]], list[int]]:
    """([(module, [names imported from it])], lines of computed-name imports) for the imports
    inside `top` that the source of module `name` makes (each file read once while unchanged:
    every sandbox start asks again)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns, name, is_package, top)
    if key not in _READ:
        _READ[key] = _read_imports(name, path, is_package, top)
    return _READ[key]


def _read_imports(name: str, path: Path, is_package: bool,
                  top: str) -> tuple[list[tuple[str, list[str]]], list[int]]:
    package = name if is_package else name.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []
    computed: list[int] = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{module}" if module else base
            found.append((module, [alias.name for alias in node.names]))
        else:
            literal = _dynamic(node)
            if literal == "":
                computed.append(node.lineno)
            elif literal:
                found.append((literal, []))
    inside = [(m, names) for m, names in found if m == top or m.startswith(top + ".")]
    return inside, computed


def closure(entries: list[str], roots: dict[str, Path], shells: tuple[str, ...] = (),
            top: str = "a2c") -> Closure:
    """The modules `entries` import inside `top`, with every package above each of them (Python
    runs a package's `__init__` before its submodule): see the module docstring."""
    result = Closure()
    todo = list(entries)
    for entry in entries:
        if locate(entry, roots) is None:
            raise ClosureError(f"entry module {entry} not found")
    while todo:
        name = todo.pop()
        if name in result.files:
            continue
        found = locate(name, roots)
        if found is None:
            continue   # a name imported from a module (`from a2c.x import y`), or not ours
        path, is_package = found
        result.files[name] = path
        if is_package:
            result.packages.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        if name in shells:
            result.shells.add(name)
            continue
        imported, computed = imports_of(name, path, is_package, top)
        if computed:
            result.dynamic[name] = computed
        for module, names in imported:
            for item in names:
                if module in shells and item != "*" and locate(f"{module}.{item}", roots) is None:
                    raise ClosureError(f"{name} imports {item!r} from {module}, whose __init__ "
                                       "the agent's view leaves empty: import it from its module")
            todo.append(module)
            todo += [f"{module}.{item}" for item in names if item != "*"]
    return result
