"""Reading one spec file: YAML with positions, `extends:` bases merged (cycles, depth and a base
of another kind refused), the kind checked against the file's folder, renamed fields read under
their new names (renamed.py) — a `Document`, before any schema or semantic check (load.py runs
those). Apart from load.py so that a check may read a referenced spec (a suite's tasks and
agents) without depending on the pipeline that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.compiler.renamed import apply_renames
from a2c.compiler.schema import KINDS, suggest
from a2c.compiler.yamlsrc import Source, parse
from a2c.errors import SpecError

KIND_DIRS = {"Task": "tasks", "Agent": "agents", "Suite": "suites"}
SPEC_SUFFIXES = (".yaml", ".yml")
MAX_EXTENDS_DEPTH = 16


def is_file(path: Path) -> bool:
    """`path.is_file()`, but False for a name the OS cannot even look up (too long, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


@dataclass
class Document:
    """A spec after `extends:` merging: its data, where each value came from, and its files."""

    path: Path
    kind: str
    data: dict[str, Any]
    source: Source
    files: list[Path] = field(default_factory=list)   # the spec and every base it extends
    deprecations: list[str] = field(default_factory=list)   # old field names read as new ones

    @property
    def id(self) -> str:
        """The spec's id (the schema requires one of every kind)."""
        return str(self.data.get("id"))


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
    if via and not is_file(path):
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
    deprecations = apply_renames(kind, data, source)
    return Document(path=path, kind=kind, data=data, source=source, files=files,
                    deprecations=deprecations)
