"""The provenance check's record (results/<n>.json `provenance`), typed: written by the grader's
check (runtime/grader_service/provenance.py), read back by the service and the analysis.

Why typed here: the check's verdict is recorded in signed results files, so its keys are a
contract; each class writes exactly the keys the check always wrote (`to_dict`), and reads an
older file tolerantly (`from_dict`: unknown keys ignored, missing ones at their defaults).

`weights` has two shapes: `TensorMismatch` when the tensor names or shapes differ (nothing else
is measured), `WeightChange` when they match; both name the files compared (`files`, `layout`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2c.contracts.records import Record, optional


@dataclass
class TensorMismatch(Record):
    """The submission's tensors are not the base's: the first few missing, extra, reshaped."""

    checked: bool = True
    same_tensors: bool = False
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    shape_mismatch: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    layout: str | None = None


@dataclass
class WeightChange(Record):
    """The same tensors as the base: the relative change ‖w − b‖ / ‖b‖ and the shrink
    1 − ⟨w, b⟩ / ‖b‖² per layer group and over the model, the largest of each, the fraction of
    tensors changed and the first tensors holding NaN or infinity."""

    checked: bool = True
    same_tensors: bool = True
    tensors: int = 0
    changed_fraction: float = 0.0
    relative_change: dict[str, float] = field(default_factory=dict)
    shrink: dict[str, float] = field(default_factory=dict)
    tied_head: list[str] = field(default_factory=list)
    max_relative_change: float = 0.0
    max_group: str | None = None
    median_relative_change: float = 0.0
    max_shrink: float = 0.0
    max_shrink_group: str | None = None
    max_tensor_change: float = 0.0
    max_tensor: str | None = None
    model_relative_change: float = 0.0
    model_shrink: float = 0.0
    nonfinite: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    layout: str | None = None


@dataclass
class Provenance(Record):
    """One submission against the base: `not_derived` True or False once the check ran, None
    with `error` when it could not run (then only those two and `reasons` are written)."""

    not_derived: bool | None = None
    reasons: list[str] = field(default_factory=list)
    same_architecture: bool | None = None
    same_tokenizer: bool | None = None
    weights: dict[str, Any] | None = None
    threshold: float | None = None
    matrix_threshold: float | None = None
    shrink_threshold: float | None = None
    elapsed_s: float | None = None
    error: str | None = optional()

    @classmethod
    def failed(cls, error: str) -> Provenance:
        """A check that could not run: the submission is not scored."""
        return cls(not_derived=None, reasons=[], error=error)

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            return {"not_derived": self.not_derived, "reasons": list(self.reasons),
                    "error": self.error}
        return super().to_dict()
