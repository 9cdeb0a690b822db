"""Spec fields that were renamed: a spec written for an older a2c still compiles, its old name
read as the new one, and the compiler says so (a `SpecDeprecationWarning` per field and file).

The rename happens on the merged document before the JSON Schema sees it, so the schema, the
resolver and the runtime know only the new name; the values and their positions move with the
key, so an error about the value still points at the line the author wrote. Giving both names
is refused: which one was meant cannot be told.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from a2c.compiler.yamlsrc import Source, dotted
from a2c.errors import SpecDeprecationWarning, SpecError


@dataclass(frozen=True)
class Renamed:
    """`parent.old` of a `kind` spec is now `parent.new`; `old_until`: the last a2c with the old
    name."""

    kind: str
    parent: tuple[str, ...]
    old: str
    new: str
    old_until: str


RENAMED: tuple[Renamed, ...] = (
    # `backend` meant three things (sandbox, inference, search); the grader's is the engine
    Renamed("Task", ("grader", "inference"), "backend", "engine", "0.1.0"),
)


def _move_positions(source: Source, old: tuple, new: tuple) -> None:
    for table in (source.values, source.keys):
        for path in [p for p in table if p[:len(old)] == old]:
            table[new + path[len(old):]] = table.pop(path)


def apply_renames(kind: str, data: dict[str, Any], source: Source) -> list[str]:
    """Rename, in `data` (copying each mapping it changes), every old field name of `kind`;
    returns one deprecation notice per rename, `file:line:col: path: ...`."""
    notices: list[str] = []
    for rename in RENAMED:
        if rename.kind != kind:
            continue
        node = data
        for key in rename.parent:
            if not isinstance(node.get(key), dict):
                break
            node[key] = dict(node[key])
            node = node[key]
        else:
            if rename.old not in node:
                continue
            old_path, new_path = (*rename.parent, rename.old), (*rename.parent, rename.new)
            where = source.where(old_path, key=True)
            if rename.new in node:
                raise SpecError(f"{where}: {dotted(old_path)}: the old name of "
                                f"`{rename.new}`, which is given too; keep only `{rename.new}`")
            node[rename.new] = node.pop(rename.old)
            _move_positions(source, old_path, new_path)
            notices.append(f"{where}: {dotted(old_path)}: deprecated name (renamed to "
                           f"`{rename.new}` after a2c {rename.old_until}); read as "
                           f"{dotted(new_path)}")
    return notices


def announce(notices: list[str]) -> None:
    """Warn of each notice of a spec that compiled (each message once: the warnings default)."""
    for notice in notices:
        warnings.warn(notice, SpecDeprecationWarning, stacklevel=3)
