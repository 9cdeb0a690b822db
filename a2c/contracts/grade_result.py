"""The one result type every grader returns (see docs/contracts.md, "Graders"): the record of
a graded submission, written to `RUN/results/<n>.json` by the grader service.

This module owns those files for reading too: `read_result` (the file as written: the grader's
result plus what the service adds, such as `copy_of_base` or `provenance`), `load_result` (typed)
`ResultHeader` (what the service reads of one: the verdict and the score, never the items) and
`numbered_results` (the submissions' files in order), so no other module parses them.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from a2c.contracts.records import Record


@dataclass
class GradeResult:
    """A graded submission.

    `score` and `ci95` are on the paper's 0-100 scale. Each entry of `items` holds at least
    `id, prompt, output, extracted, gold, correct, score, error`; an item's `score` is the fraction
    of that item earned, in [0, 1] (so `score` = 100 x the mean item score for every grader whose
    headline metric is a mean over items).
    """

    score: float
    ci95: tuple[float, float]
    n_items: int
    items: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    grader: str = ""
    grader_version: str = ""
    backend: str = ""  # the inference engine that scored it (key kept: a record format)
    elapsed_s: float = 0.0
    valid: bool = True
    error: str | None = None

    def to_dict(self, items: bool = True) -> dict[str, Any]:
        out = asdict(self)
        out["ci95"] = [float(self.ci95[0]), float(self.ci95[1])]
        if not items:
            out.pop("items")
        return _json_safe(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradeResult:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        ci = kwargs.get("ci95", (0.0, 0.0))
        kwargs["ci95"] = (float(ci[0]), float(ci[1]))
        kwargs.setdefault("items", [])
        return cls(**kwargs)

    def to_json(self, items: bool = True) -> str:
        return json.dumps(self.to_dict(items=items), ensure_ascii=False, sort_keys=True)

    @classmethod
    def invalid(cls, grader: str, version: str, backend: str, error: str,
                elapsed_s: float = 0.0, n_items: int = 0) -> GradeResult:
        """A submission that could not be graded (it scores 0 and says why)."""
        return cls(score=0.0, ci95=(0.0, 0.0), n_items=n_items, items=[], metrics={},
                   grader=grader, grader_version=version, backend=backend,
                   elapsed_s=elapsed_s, valid=False, error=error)


@dataclass
class ResultHeader(Record):
    """A result as the grader service reads it (the evaluator child's answer, results/<n>.json,
    results/baseline.json, a cached baseline's `result`): valid unless it says `valid: false`;
    score and interval null when it failed. The file itself is written from the whole dict."""

    score: float | None = None
    ci95: list[float] | None = None
    n_items: int | None = None
    valid: bool | None = True
    error: str | None = None
    code: str | None = None
    backend: str | None = None  # the inference engine that scored it (key kept: a record format)
    grader_version: str | None = None
    metrics: dict[str, Any] | None = None
    provenance: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Not marked invalid (a result that leaves `valid` out is valid)."""
        return self.valid is not False

    @classmethod
    def of(cls, data: dict[str, Any] | None) -> ResultHeader:
        """The header of a result dict (an empty one for None: no result)."""
        return cls.from_dict(data or {})


def read_result(path: str | Path) -> dict[str, Any]:
    """A results file as written (results/<n>.json, results/baseline.json,
    results/final-<id>.json); OSError or ValueError when it is missing or not a JSON object."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


def read_result_or_none(path: str | Path) -> dict[str, Any] | None:
    """`read_result`, or None for a file that is missing or unreadable (a damaged record)."""
    try:
        return read_result(path)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def load_result(path: str | Path) -> GradeResult:
    """A results file as a `GradeResult` (the keys the service adds are dropped)."""
    return GradeResult.from_dict(read_result(path))


def numbered_results(results_dir: str | Path) -> list[Path]:
    """The submissions' results files (`<n>.json`, n a number) of a results folder, by number."""
    paths = [p for p in Path(results_dir).glob("*.json") if p.stem.isdigit()]
    return sorted(paths, key=lambda p: int(p.stem))


def _json_safe(obj: Any) -> Any:
    """Plain JSON types only: tuples become lists, numpy scalars floats, NaN/inf become None."""
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item"):  # numpy scalar
        return _json_safe(obj.item())
    return str(obj)
