"""Loading a spec: YAML with positions → `extends:` merge → JSON Schema → semantic checks → resolved.

`load_spec(path)` is the one entry point the rest of a2c uses; it returns the resolved spec (the
shape documented in docs/contracts.md) or raises `SpecError` listing every problem found as
`file:line:col: field.path: what is wrong`.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from a2c.compiler import checks as _checks  # noqa: F401  (registers the semantic checks)
from a2c.compiler import datacheck, resolve
from a2c.compiler import params as _params  # noqa: F401  (registers the agent params checks)
from a2c.compiler import suite_checks as _suite_checks  # noqa: F401  (registers a suite's checks)
from a2c.compiler.checking import check
from a2c.compiler.renamed import announce
from a2c.compiler.document import (
    KIND_DIRS,
    SPEC_SUFFIXES,
    Document,
    is_file,
    read_document,
)
from a2c.compiler.schema import KINDS, problems_for, suggest
from a2c.compiler.yamlsrc import dotted
from a2c.errors import SpecError
from a2c.paths import SPECS_DIR, project_root


def validate_document(doc: Document) -> list[str]:
    """All schema problems, then (only if the shape is right) all semantic problems."""
    problems = problems_for(KINDS[doc.kind], doc.data, doc.source)
    if problems:
        return problems
    return check(doc) + datacheck.problems(doc)


def load_document(path: str | Path, expect_kind: str | None = None) -> Document:
    doc = read_document(path, expect_kind)
    problems = validate_document(doc)
    if problems:
        raise SpecError(problems)
    announce(doc.deprecations)
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
            if is_file(candidate):
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
