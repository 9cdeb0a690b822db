"""The base of every typed record: a dataclass that writes the same JSON the files hold.

`Record.to_dict()` writes every field, except those declared with `optional()` whose value is
None (the key is left out, as the writers always did), a nested record as its object and a tuple
as a list; `from_dict()` reads tolerantly: unknown keys are ignored and missing ones take the
field's default, so an older record still reads. `Record` is no dataclass itself, so a subclass
may be a frozen one (a2c.contracts.parts.Part, which also reads nested records back: the
plans, the records of what a server or a model was, the report's and the trajectory's parts).
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


def plain(value: Any) -> Any:
    """`value` as JSON holds it: records as objects, tuples as lists (lists and objects copied)."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Record:
    """The base of the record dataclasses (each subclass is one, frozen or not)."""

    SCHEMA_VERSION: ClassVar[int] = 1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type] - every subclass is a dataclass
            value = getattr(self, f.name)
            if value is None and f.metadata.get(OMIT_NONE):
                continue
            out[f.name] = plain(value)
        return out

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        known = {f.name for f in fields(cls) if f.init}  # type: ignore[arg-type]
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
    backend: str | None = None  # the inference engine that scored it (key kept: a record format)
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
