"""The base of every typed record: a dataclass that writes the same JSON the files hold.

`Record.to_dict()` writes every field, except those declared with `optional()` whose value is
None (the key is left out, as the writers always did); `from_dict()` reads tolerantly: unknown
keys are ignored and missing ones take the field's default, so an older record still reads.
`FrozenRecord` is the same JSON for a record that does not change once made (a plan, what a
server was), with its nested records and tuples read back as such.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Record")
F = TypeVar("F", bound="FrozenRecord")
OMIT_NONE = "a2c_omit_none"
UNIONS = (typing.Union, types.UnionType)


def optional(default: Any = None) -> Any:
    """A field that is left out of the JSON when it is None."""
    return dataclasses.field(default=default, metadata={OMIT_NONE: True})


@dataclass
class Record:
    SCHEMA_VERSION: ClassVar[int] = 1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get(OMIT_NONE):
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        known = {f.name for f in fields(cls) if f.init}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class ScoredFields(Record):
    """What a scored (or invalid) submission records, the same in the event (`submission_scored`,
    a2c.contracts.events) and the grader's journal (`scored`, a2c.contracts.journal): declared
    once so the two cannot drift. `code` (a2c.contracts.submission_errors) says why it is
    invalid; `copy_of_base` whether its weights are the untouched base model's; `not_derived`
    whether the provenance check found it is not derived from the base (the details are in
    results/<n>.json `provenance`)."""

    id: int | str = 0
    score: float | None = None
    ci95: list[float] | None = None
    valid: bool = False
    error: str | None = None
    code: str | None = None
    duplicate_of: int | str | None = None
    copy_of_base: bool | None = None
    elapsed_s: float | None = None
    backend: str | None = None
    not_derived: bool | None = optional()


def read_jsonl_tolerant(path: Path) -> tuple[list[dict], list[tuple[int, str]]]:
    """(objects, [(line, problem)]): unparsable lines are reported, not fatal; each object gets
    its 1-based line number as `_line` (for readers that name the line of a problem)."""
    rows: list[dict] = []
    problems: list[tuple[int, str]] = []
    if not path.is_file():
        return rows, problems
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                problems.append((lineno, f"not valid JSON: {exc}"))
                continue
            if not isinstance(obj, dict):
                problems.append((lineno, "not a JSON object"))
                continue
            obj["_line"] = lineno
            rows.append(obj)
    return rows, problems


@dataclass(frozen=True)
class FrozenRecord:
    """A record that does not change once made (a plan, what a server was): `Record`'s JSON,
    frozen, with its nested records (`NESTED`: field name -> record type) read and written as
    their own JSON objects."""

    NESTED: ClassVar[dict[str, type]] = {}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get(OMIT_NONE):
                continue
            if isinstance(value, FrozenRecord):
                value = value.to_dict()
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls: type[F], data: dict[str, Any]) -> F:
        known = {f.name for f in fields(cls) if f.init}
        given = {k: v for k, v in data.items() if k in known}
        for name, kind in cls.NESTED.items():
            if isinstance(given.get(name), dict):
                given[name] = kind.from_dict(given[name])
        for name in _tuple_fields(cls):
            if isinstance(given.get(name), list):
                given[name] = tuple(given[name])
        return cls(**given)


@functools.cache
def _tuple_fields(cls: type) -> tuple[str, ...]:
    """The fields of a record declared as tuples (JSON holds them as arrays)."""
    hints = typing.get_type_hints(cls)
    return tuple(f.name for f in fields(cls) if f.init and _is_tuple(hints[f.name]))


def _is_tuple(tp: Any) -> bool:
    """A tuple type, alone or in a union (`tuple[str, ...] | None`)."""
    if typing.get_origin(tp) is tuple:
        return True
    return typing.get_origin(tp) in UNIONS and any(_is_tuple(arg) for arg in typing.get_args(tp))
