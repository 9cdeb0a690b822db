"""The base of every typed record: a dataclass that writes the same JSON the files hold.

`Record.to_dict()` writes every field, except those declared with `optional()` whose value is
None (the key is left out, as the writers always did); `from_dict()` reads tolerantly: unknown
keys are ignored and missing ones take the field's default, so an older record still reads.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Record")
OMIT_NONE = "a2c_omit_none"


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
