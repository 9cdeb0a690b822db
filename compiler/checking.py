"""The semantic checks' registry: `check_for(kind, ...)` registers a check `(doc) -> [(path, what,
[key])]`, `check(doc)` runs every check of the document's kind and words each problem
`file:line:col: field.path: what`. Also what several checks read: a referenced task's or agent's
spec (`_referenced_data`). The checks themselves are checks.py and params.py (agent params);
load.py imports them so that they register.
"""

from __future__ import annotations

from pathlib import Path

from a2c.compiler.document import is_file, read_document
from a2c.compiler.yamlsrc import dotted
from a2c.errors import SpecError

_CHECKS: dict[str, list] = {"Task": [], "Agent": [], "Suite": []}


def check_for(*kinds):
    def register(fn):
        for kind in kinds:
            _CHECKS[kind].append(fn)
        return fn
    return register


def check(doc) -> list[str]:
    problems = []
    for fn in _CHECKS[doc.kind]:
        for path, what, *key in fn(doc):
            where = doc.source.where(path, key=bool(key and key[0]))
            problems.append(f"{where}: {dotted(path) or '(document)'}: {what}")
    return problems


def _spec_file(root: Path, folder: str, ident: str) -> Path | None:
    return next((root / folder / f"{ident}{s}" for s in (".yaml", ".yml")
                 if is_file(root / folder / f"{ident}{s}")), None)


def _referenced_data(root: Path, folder: str, ident: str) -> dict | None:
    """A referenced task's or agent's document (bases merged), or None if it does not read; its
    own problems are reported when it is validated itself."""
    path = _spec_file(root, folder, ident)
    if path is None:
        return None
    try:
        return read_document(path).data
    except (SpecError, OSError):
        return None
