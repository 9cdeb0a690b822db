"""Loading a spec: YAML with positions → `extends:` merge → JSON Schema → semantic checks → resolved.

`load_spec(path)` is the one entry point the rest of a2c uses; it returns the resolved spec (the
shape documented in docs/contracts.md) or raises `SpecError` listing every problem found as
`file:line:col: field.path: what is wrong`.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.compiler import checks, datacheck, resolve
from a2c.compiler.schema import KINDS, problems_for, suggest
from a2c.compiler.yamlsrc import Source, dotted, parse
from a2c.errors import SpecError
from a2c.paths import SPECS_DIR, project_root

KIND_DIRS = {"Task": "tasks", "Agent": "agents", "Suite": "suites"}
SPEC_SUFFIXES = (".yaml", ".yml")
MAX_EXTENDS_DEPTH = 16


@dataclass
class Document:
    """A spec after `extends:` merging: its data, where each value came from, and its files."""

    path: Path
    kind: str
    data: dict[str, Any]
    source: Source
    files: list[Path] = field(default_factory=list)   # the spec and every base it extends


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = _merge(base[key], value) if key in base else value
        return out
    return over


def _read(path: Path, stack: tuple[Path, ...], via: str | None) -> tuple[dict, Source, list[Path]]:
    try:
        resolved = path.resolve()
    except (OSError, ValueError):   # a NUL byte, a name too long: the OS cannot look it up
        raise SpecError(f"{via}: extends: base file not found: {path!r}") from None
    if resolved in stack:
        chain = " -> ".join(p.name for p in (*stack, resolved))
        raise SpecError(f"{via}: extends: cycle: {chain}")
    if len(stack) > MAX_EXTENDS_DEPTH:
        raise SpecError(f"{via}: extends: more than {MAX_EXTENDS_DEPTH} levels deep")
    if via and not checks.is_file(path):
        raise SpecError(f"{via}: extends: base file not found: {path}")
    source = parse(path)
    data = source.data
    if not isinstance(data, dict):
        raise SpecError(f"{source.where(())}: (document): a spec must be a mapping of keys, "
                        f"not {type(data).__name__ if data is not None else 'null'}")
    files = [path]
    base_ref = data.get("extends")
    if base_ref is None:
        return data, source, files
    where = source.where(("extends",))
    if not isinstance(base_ref, str) or not base_ref:
        raise SpecError(f"{where}: extends: must be the path of a base spec file")
    base_path = (path.parent / base_ref)
    base_data, base_source, base_files = _read(base_path, (*stack, resolved), where)
    merged = _merge({k: v for k, v in base_data.items() if k != "extends"},
                    {k: v for k, v in data.items() if k != "extends"})
    combined = Source(file=source.file, data=merged)
    combined.values = {**base_source.values, **source.values}
    combined.keys = {**base_source.keys, **source.keys}
    base_kind = base_data.get("kind")
    if base_kind is not None and data.get("kind") is not None and base_kind != data.get("kind"):
        raise SpecError(f"{where}: extends: base is a {base_kind} spec but this is a "
                        f"{data.get('kind')} spec")
    return merged, combined, files + base_files


def _shown(value: Any) -> str:
    """A wrong value as a message shows it: a short repr, or what kind of YAML value it is."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def read_document(path: str | Path, expect_kind: str | None = None) -> Document:
    """Parse, merge bases and check the kind; no schema validation yet."""
    path = Path(path)
    data, source, files = _read(path, (), None)
    kind = data.get("kind")
    if kind is None:
        raise SpecError(f"{source.where(())}: kind: required field is missing "
                        f"(one of: {', '.join(KINDS)})")
    if not isinstance(kind, str) or kind not in KINDS:
        raise SpecError(f"{source.where(('kind',))}: kind: must be one of: {', '.join(KINDS)} "
                        f"(got {_shown(kind)}){suggest(kind, KINDS) if isinstance(kind, str) else ''}")
    if expect_kind and kind != expect_kind:
        raise SpecError(f"{source.where(('kind',))}: kind: expected a {expect_kind} spec, "
                        f"this file is a {kind} spec")
    parent = path.resolve().parent.name
    for other_kind, folder in KIND_DIRS.items():
        if parent == folder and kind != other_kind:
            raise SpecError(f"{source.where(('kind',))}: kind: a spec under {folder}/ must be a "
                            f"{other_kind} spec, this file is a {kind} spec (wrong kind)")
    return Document(path=path, kind=kind, data=data, source=source, files=files)


def validate_document(doc: Document) -> list[str]:
    """All schema problems, then (only if the shape is right) all semantic problems."""
    problems = problems_for(KINDS[doc.kind], doc.data, doc.source)
    if problems:
        return problems
    return checks.check(doc) + datacheck.problems(doc)


def load_document(path: str | Path, expect_kind: str | None = None) -> Document:
    doc = read_document(path, expect_kind)
    problems = validate_document(doc)
    if problems:
        raise SpecError(problems)
    return doc


def load_spec(path: str | Path, expect_kind: str | None = None) -> dict[str, Any]:
    """The resolved spec (task, agent or suite) at `path` (a file, or an id found by find_spec)."""
    doc = load_document(find_spec(path), expect_kind)
    return resolve.resolve(doc)


def specs_root() -> Path:
    """specs/ of the checkout the user is in, else the one shipped in the package."""
    candidate = project_root() / "specs"
    return candidate if candidate.is_dir() else SPECS_DIR


_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def find_spec(name_or_path: str | Path, kind: str | None = None) -> Path:
    """A path as given if it exists, else the spec with that id under specs/{tasks,agents,suites}."""
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except (OSError, ValueError):       # a name the OS cannot look up (too long, a NUL byte)
        exists = False
    if exists or not _ID.match(str(name_or_path)):
        return path
    root = specs_root()
    folders = [KIND_DIRS[kind]] if kind else list(KIND_DIRS.values())
    for folder in folders:
        for suffix in SPEC_SUFFIXES:
            candidate = root / folder / f"{name_or_path}{suffix}"
            if checks.is_file(candidate):
                return candidate
    known = sorted(p.stem for f in folders for p in (root / f).glob("*.y*ml")) \
        if root.is_dir() else []
    raise SpecError(f"{name_or_path}: no such spec file, and no spec with that id under "
                    f"{root}{suggest(str(name_or_path), known)}")


def discover(root: str | Path | None = None) -> list[Path]:
    """Every task, agent and suite spec under specs/ (bases under specs/base/ are not specs)."""
    root = Path(root) if root else specs_root()
    found = []
    for folder in KIND_DIRS.values():
        for suffix in SPEC_SUFFIXES:
            found.extend((root / folder).glob(f"*{suffix}"))
    return sorted(found)


def deepcopy(obj):
    return copy.deepcopy(obj)


__all__ = [
    "Document",
    "discover",
    "dotted",
    "find_spec",
    "load_document",
    "load_spec",
    "read_document",
    "specs_root",
    "validate_document",
]
