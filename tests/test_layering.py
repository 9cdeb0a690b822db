"""The dependency rule (docs/architecture.md): contracts and the shared helpers at the bottom;
the compiler, the runtime and the analysis depend on them and not on each other; only the CLI
package (`a2c/cli/`) uses several areas at once (e.g. `a2c run SPEC` compiles, then runs).

a2c's own agents (`agents/`, `a2c.agents`: the reference agents, their kit, the scripted driver)
sit beside the runtime: no area imports them (the runtime starts them by module name in a process
of their own), and they import the bottom layer plus the few runtime modules that the kit wraps,
each from its one kit module (`AGENTS_MAY_IMPORT`).

One edge is allowed and named here: the compiler renders a level-3 task's PROMPT_FORMAT.md with
`a2c.runtime.envs.prompts.describe` (stdlib only), so the format the agent reads is produced by
the code that builds the prompts, and a drift fails `a2c build --check`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import a2c
import a2c.agents
import a2c.analysis
import a2c.compiler
import a2c.runtime

AREAS = {
    "compiler": Path(a2c.compiler.__file__).resolve().parent,
    "runtime": Path(a2c.runtime.__file__).resolve().parent,
    "analysis": Path(a2c.analysis.__file__).resolve().parent,
    "agents": Path(a2c.agents.__file__).resolve().parent,
    "contracts": Path(a2c.__file__).resolve().parent / "contracts",
}
ALLOWED = {("compiler", "a2c.runtime.envs.prompts")}
# The runtime modules a2c.agents may import, each from the one kit module that wraps it: the level-3
# environments and rollouts, and the inference engines with the rollouts' policy settings (so an
# agent trains and generates exactly as it is scored). No grader: the answer check is the bottom
# layer's a2c.answer_match, which the exact_match grader scores with.
AGENTS_MAY_IMPORT = {
    "a2c.runtime.envs.prompts": "kit/environments.py",
    "a2c.runtime.envs.registry": "kit/environments.py",
    "a2c.runtime.envs.rollout": "kit/environments.py",
    "a2c.runtime.envs.policy": "kit/inference.py",
    "a2c.runtime.inference": "kit/inference.py",
}


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _offenders(area: str) -> list[str]:
    others = [f"a2c.{name}" for name in AREAS if name not in (area, "contracts")] + ["a2c.cli"]
    found = []
    for path in sorted(AREAS[area].rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in _imports(tree):
            hit = next((o for o in others if name == o or name.startswith(o + ".")), None)
            wrapped = area == "agents" and AGENTS_MAY_IMPORT.get(name) == \
                path.relative_to(AREAS[area]).as_posix()
            if hit and (area, name) not in ALLOWED and not wrapped:
                found.append(f"{area}/{path.relative_to(AREAS[area])}:{line}: {name}")
    return found


@pytest.mark.parametrize("area", ["compiler", "runtime", "analysis", "agents"])
def test_areas_do_not_import_each_other(area):
    assert _offenders(area) == []


def test_the_runtime_starts_the_agents_by_module_name():
    """The scripted driver and the reference agents run as processes of their own, named by
    module (the gateway's SCRIPTED_MODULE, a reference agent's launch command), never imported."""
    import importlib.util

    from a2c.runtime.driver_gateway.process import SCRIPTED_MODULE
    assert SCRIPTED_MODULE == "a2c.agents.scripted_driver"
    assert importlib.util.find_spec(SCRIPTED_MODULE) is not None
    for listed in AGENTS_MAY_IMPORT:   # the list names modules that exist
        assert importlib.util.find_spec(listed) is not None, listed


def test_contracts_import_no_area():
    assert _offenders("contracts") == []
    tree_names = {name for path in AREAS["contracts"].rglob("*.py")
                  for _, name in _imports(ast.parse(path.read_text(encoding="utf-8")))}
    assert not {n for n in tree_names if n.startswith(("a2c.compiler", "a2c.runtime", "a2c.agents",
                                                       "a2c.analysis", "a2c.cli"))}


def test_no_test_module_imports_a_conftest_by_name():
    """`from conftest import X` picks whichever conftest pytest imported first (tests/compiler's
    shadowed the driver tests' in a full run): shared helpers live in uniquely named modules."""
    root = Path(__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if re.search(r"^\s*(from conftest import|import conftest)", p.read_text(
                     encoding="utf-8"), re.M)]
    assert offenders == []


def test_wire_package_is_bottom_layer():
    """a2c/wires/ (the four driver wire formats, read by the gateway, the analysis and the
    scripted driver) imports the standard library and `a2c`'s own shared modules only."""
    import sys
    root = Path(a2c.__file__).resolve().parent / "wires"
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, name in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            top = name.split(".")[0]
            area = name.startswith(("a2c.compiler", "a2c.runtime", "a2c.agents", "a2c.analysis",
                                    "a2c.cli"))
            if area or (top != "a2c" and top not in sys.stdlib_module_names):
                found.append(f"wires/{path.name}:{line}: {name}")
    assert found == []
