"""What `a2c doctor`'s rows add up to: ready for the demo or not, which rows keep it from being
ready, the optional rows not ok, and the exit status they mean (0 ready, 1 a required row
missing, 3 only optional rows not ok). Here, beside the rows, so the command only prints it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .row import MISSING, Check

READY, NOT_READY, OPTIONAL_MISSING = 0, 1, 3


@dataclass(frozen=True)
class Verdict:
    ready_for_demo: bool
    required_missing: list[str]
    optional_missing: list[str]
    exit: int
    ok: bool

    @classmethod
    def of(cls, rows: list[Check]) -> Verdict:
        required = [row.name for row in rows if row.required and row.status == MISSING]
        optional = [row.name for row in rows if not row.required and not row.ok]
        code = NOT_READY if required else OPTIONAL_MISSING if optional else READY
        return cls(ready_for_demo=not required, required_missing=required,
                   optional_missing=optional, exit=code, ok=code == READY)

    def as_dict(self) -> dict[str, Any]:
        """`a2c doctor --json`'s verdict keys."""
        return asdict(self)
