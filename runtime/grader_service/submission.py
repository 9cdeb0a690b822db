"""A submission as the grader service holds it: its journal lines, typed, and its state.

Why one record: the service, its pruning and its HTTP answers all read the same facts about a
submission (what was received, whether it is queued, running or scored, what the score was), and
the journal is where those facts are durable. So a submission is its `received` line and, once
scored, its `scored` line (a2c.contracts.journal), plus what only the living service knows (the
state, the intake's tensor hash, the snapshot). A restart rebuilds the same records from the
journal (`replay`); the HTTP answer is made from them at the one place (`Submission.public`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from a2c.contracts.grade_result import ResultHeader
from a2c.contracts.journal import JournalReceived, JournalScored, entry_of
from a2c.contracts.submission_errors import SubmissionError

QUEUED, RUNNING, SCORED, INVALID = "queued", "running", "scored", "invalid"

# What GET /submissions/<id> answers (docs/grader-service.md), in this order.
PUBLIC_FIELDS = ("id", "status", "score", "ci95", "valid", "error", "code", "duplicate_of",
                 "copy_of_base", "not_derived",
                 "model_path", "note", "weights_hash", "received_at", "scored_at", "elapsed_s",
                 "backend", "metrics", "queue_position")


@dataclass
class Submission:
    """One submission: `received` (durable before it was acknowledged), `scored` once its result
    is in, `status` queued | running | scored | invalid."""

    received: JournalReceived
    status: str = QUEUED
    scored: JournalScored | None = None
    tensors_hash: str | None = None   # the intake's; recomputed from the copy after a restart
    snapshot: str | None = None       # the workspace commit taken at submit

    @property
    def id(self) -> int:
        return int(self.received.id)

    @property
    def weights_hash(self) -> str | None:
        return self.received.weights_hash

    @property
    def model_path(self) -> str | None:
        return self.received.model_path

    @property
    def pending(self) -> bool:
        return self.status in (QUEUED, RUNNING)

    @property
    def score(self) -> float | None:
        return self.scored.score if self.scored is not None else None

    @property
    def counts(self) -> bool:
        """Scored valid, with a score: a candidate for the best and the last submission."""
        return self.status == SCORED and self.scored is not None and self.scored.valid \
            and self.scored.score is not None

    @property
    def duplicate_of(self) -> int | str | None:
        return self.scored.duplicate_of if self.scored is not None else None

    def record(self, scored: JournalScored) -> None:
        """The outcome is in (journaled by the caller): scored when valid, else invalid."""
        self.scored = scored
        self.status = SCORED if scored.valid else INVALID

    def fail_unrecorded(self, error: str) -> None:
        """An outcome the journal could not take (e.g. a full disk): shown, re-run on resume."""
        self.scored = JournalScored(id=self.id, valid=False, error=error,
                                    code=SubmissionError.INTERNAL_ERROR.value)
        self.status = INVALID

    def public(self, queue_position: int | None = None) -> dict[str, Any]:
        """The HTTP answer: the journal's fields the agent may see, scalar metrics only."""
        out: dict[str, Any] = {"id": self.id, "status": self.status, "score": None,
                               "error": None, "model_path": self.received.model_path,
                               "note": self.received.note, "weights_hash": self.weights_hash,
                               "received_at": self.received.ts}
        if self.scored is not None:
            out.update({k: v for k, v in self.scored.to_dict().items() if k in PUBLIC_FIELDS})
            out["scored_at"] = self.scored.ts or None
        out["metrics"] = scalar_metrics(self.scored.metrics if self.scored else None)
        if self.status == QUEUED and queue_position is not None:
            out["queue_position"] = queue_position
        return {k: out[k] for k in PUBLIC_FIELDS if k in out}


def scalar_metrics(metrics: Any) -> dict[str, Any]:
    """The metrics an answer shows: scalars only (no per-item lists)."""
    if not isinstance(metrics, dict):
        return {}
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool)) or v is None}


def replay(rows: Iterable[dict[str, Any]]) -> dict[int, Submission]:
    """The submissions a journal's lines record: every received one, with its outcome when a
    scored line follows (unscored ones are queued again)."""
    subs: dict[int, Submission] = {}
    for row in rows:
        entry = entry_of(row)
        if entry is None or not isinstance(entry.id, int):
            continue
        if isinstance(entry, JournalReceived):
            subs[entry.id] = Submission(received=entry)
        elif isinstance(entry, JournalScored) and entry.id in subs:
            subs[entry.id].record(entry)
    return subs


def outcome_of(result: dict[str, Any]) -> JournalScored:
    """The journal's view of a GradeResult (results/<n>.json as read): score and CI only when
    valid, the error and its code otherwise, the scalar metrics. `id` and `ts` are set when it
    is recorded."""
    header = ResultHeader.of(result)
    valid = header.ok
    return JournalScored(
        score=header.score if valid else None,
        ci95=header.ci95 if valid else None, valid=valid,
        error=None if valid else (header.error or "invalid result"),
        code=None if valid else (header.code or SubmissionError.GRADER_INVALID.value),
        backend=header.backend, metrics=scalar_metrics(header.metrics))
