"""Frozen records that nest: a JSON document read into typed parts and written back unchanged.

`Record` (records.py) reads and writes one flat object; a document such as trajectory.json or
report.json nests objects in objects. A `Part` reads each field into its annotation (a nested
`Part` or `Record` from its object, a tuple of them from a list) and writes nested parts back as
the objects they were read from, tuples as lists: the same JSON for the same values. Tolerant
like every record reader: unknown keys are ignored, missing ones take the field's default, and a
value that does not fit its annotation is kept as it is (for the schema check to name).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from .records import OMIT_NONE, Record

P = TypeVar("P", bound="Part")


def plain(value: Any) -> Any:
    """`value` as JSON holds it: parts and records as objects, tuples as lists."""
    if isinstance(value, (Part, Record)):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _read(value: Any, hint: Any) -> Any:
    """`value` as JSON holds it, read into the annotation `hint` (nested parts parsed; what
    does not fit is kept as it is, for the schema check to name)."""
    if value is None:
        return None
    options = [a for a in typing.get_args(hint) if a is not type(None)] \
        if typing.get_origin(hint) in (typing.Union, types.UnionType) else [hint]
    for option in options:
        if isinstance(option, type) and issubclass(option, (Part, Record)) \
                and isinstance(value, dict):
            return option.from_dict(value)
        if typing.get_origin(option) is tuple and isinstance(value, list):
            inner = typing.get_args(option)[0]
            return tuple(_read(v, inner) for v in value)
    return value


@dataclass(frozen=True)
class Part:
    """A part of a nested JSON document: written as the JSON object it is read from (a field
    declared `optional()` is left out when None), nested parts as objects, tuples as lists."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get(OMIT_NONE):
                continue
            out[f.name] = plain(value)
        return out

    @classmethod
    def from_dict(cls: type[P], data: dict[str, Any]) -> P:
        """Tolerant, as every record reader: unknown keys ignored, missing ones defaulted."""
        hints = _hints(cls)
        return cls(**{f.name: _read(data[f.name], hints[f.name]) for f in fields(cls)
                      if f.init and f.name in data})

    def replace(self: P, **changes: Any) -> P:
        return dataclasses.replace(self, **changes)
