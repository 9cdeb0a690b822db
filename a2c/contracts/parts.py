"""Frozen records that nest: a JSON document read into typed parts and written back unchanged.

`Record.from_dict` (records.py) reads one flat object; a document such as trajectory.json or
report.json nests objects in objects. A `Part` is a frozen `Record` that reads each field into
its annotation (a nested record from its object, a tuple of them from a list); it is written as
every record is (`Record.to_dict`: nested records as objects, tuples as lists), so the same
values give the same JSON. Tolerant like every record reader: unknown keys are ignored, missing
ones take the field's default, and a value that does not fit its annotation is kept as it is
(for the schema check to name).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from .records import Record

P = TypeVar("P", bound="Part")


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
        if isinstance(option, type) and issubclass(option, Record) \
                and isinstance(value, dict):
            return option.from_dict(value)
        if typing.get_origin(option) is tuple and isinstance(value, list):
            inner = typing.get_args(option)[0]
            return tuple(_read(v, inner) for v in value)
    return value


@dataclass(frozen=True)
class Part(Record):
    """A frozen record of a nested JSON document: written as every record (`Record.to_dict`:
    nested parts as objects, tuples as lists), read back with its nested parts parsed."""

    @classmethod
    def from_dict(cls: type[P], data: dict[str, Any]) -> P:
        """Tolerant, as every record reader: unknown keys ignored, missing ones defaulted."""
        hints = _hints(cls)
        return cls(**{f.name: _read(data[f.name], hints[f.name]) for f in fields(cls)
                      if f.init and f.name in data})

    def replace(self: P, **changes: Any) -> P:
        return dataclasses.replace(self, **changes)
