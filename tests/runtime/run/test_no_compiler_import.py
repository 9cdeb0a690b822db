"""The runtime never imports the compiler: both depend on a2c.contracts, not on each other.

Compiling a spec handed to `a2c run` is the CLI's step (`a2c.runtime.run_cli`, a CLI module may
depend on both), so that module is the only exception.
"""

from __future__ import annotations

import ast
from pathlib import Path

import a2c.runtime

RUNTIME = Path(a2c.runtime.__file__).resolve().parent
CLI_MODULES = {"run_cli.py"}   # wave 2 moves it into a2c/cli/


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return out


def test_no_runtime_module_imports_the_compiler():
    offenders = []
    for path in sorted(RUNTIME.rglob("*.py")):
        rel = path.relative_to(RUNTIME)
        if len(rel.parts) == 1 and rel.name in CLI_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in _imports(tree):
            if name == "a2c.compiler" or name.startswith("a2c.compiler."):
                offenders.append(f"runtime/{rel}:{line}: {name}")
    assert offenders == []
