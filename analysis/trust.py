"""Scores you can trust: the report's paired interval of the improvement, the final split and
the provenance of each submission, from the record's results files.

- `paired_improvement(best, baseline, seed)`: best − baseline over the *same* items (matched by
  item id), with the paired BCa bootstrap interval (a2c.intervals.paired_interval), and whether
  it is outside the noise (the interval excludes 0). Why paired: both models answered the same
  items; the item's difficulty cancels in the difference, so this interval is what says whether
  an improvement of a few points is real.
- `final_split(record)`: with a final split (`scoring.final`), the counted submission's and the
  baseline's scores on the items the agent never got feedback on, their feedback scores, and the
  selection gap `(feedback − baseline) − (final − baseline on final)`: what the selection of the
  best of many submissions on feedback added to the feedback gain.
- `provenance(record)`: each valid submission's provenance check (results/<n>.json
  `provenance`, written by the grader): changed fraction, median relative change, not derived.

Every interval states its seed (`INTERVAL_SEED`) and method, so a reader can recompute it.
Aggregation over seeds calls `improvement_interval(values, seed)` (re-exported from
a2c.intervals) or `group_improvement(improvements, paired)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2c.contracts.event_payloads import FinalScored
from a2c.contracts.parts import Part
from a2c.contracts.provenance import Provenance
from a2c.contracts.records import Record
from a2c.intervals import (  # noqa: F401 - improvement_interval: the seeds' API
    INTERVAL_SEED,
    difference_interval,
    improvement_interval,
    item_scores,
    paired_improvement,
    paired_interval,
)

from .interval_records import DifferenceInterval, GroupInterval, PairedInterval
from .record import RunRecord, sid
from .result_file import ResultFile
from .rows import SubmissionRow


def statement(interval: PairedInterval | None) -> str:
    """The report's one plain sentence about an improvement's interval."""
    if not interval or interval.ci95 is None:
        return "no paired interval: the results have no per-item scores to pair"
    lo, hi = interval.ci95
    where = (f"{interval.difference:+.1f} points, 95% interval [{lo:+.1f}, {hi:+.1f}] over "
             f"{interval.n_items} paired items")
    if interval.outside_noise:
        side = "an improvement" if lo > 0 else "a loss"
        return f"{where}: {side} outside the noise (the interval excludes 0)"
    return f"{where}: within the noise (the interval includes 0)"


@dataclass(frozen=True)
class FinalSplit(Part):
    """The report's `final_split`: the counted submission's and the baseline's scores on the
    final items and on feedback, the selection gap with its interval, and the paired interval
    on the final items (each statement one sentence about an interval)."""

    submission: str | None = None
    score: float | None = None
    baseline: float | None = None
    n_items: int | None = None
    feedback_score: float | None = None
    feedback_baseline: float | None = None
    feedback_improvement: float | None = None
    final_improvement: float | None = None
    selection_gap: float | None = None
    selection_gap_interval: DifferenceInterval | None = None
    selection_gap_statement: str | None = None
    paired_interval: PairedInterval | None = None
    statement: str | None = None


@dataclass(frozen=True)
class Improvement(Part):
    """The report's `improvement`: the best submission's paired interval against the baseline."""

    submission: str | None = None
    paired_interval: PairedInterval | None = None
    statement: str | None = None


@dataclass(frozen=True)
class ProvenanceSection(Part):
    """The report's `provenance`: a row per valid submission with a provenance check, and the
    ids of those not derived from the base model."""

    rows: tuple[ProvenanceRow, ...] = ()
    not_derived: tuple[str, ...] = ()


def final_split(record: RunRecord) -> FinalSplit | None:
    """The final split's scores (from the final_scored events and their results files) with the
    selection gap and the paired interval on the final items; None without a final split."""
    events = {str(e.data.subject): e.data for e in record.payloads(FinalScored)}
    if not events:
        return None
    none = FinalScored(subject="")
    sub, base = events.get("submission") or none, events.get("baseline") or none
    final, final_base = sub.score, base.score
    feedback, feedback_base = sub.feedback_score, base.feedback_score
    gap = None
    if final is not None and final_base is not None and feedback is not None \
            and feedback_base is not None:
        gap = round((feedback - feedback_base) - (final - final_base), 6)
    paired = gap_interval = None
    if sub.result and base.result:
        final_sub, final_base_result = record.result(sub.result), record.result(base.result)
        paired = PairedInterval.of(paired_improvement(final_sub, final_base_result))
        gap_interval = selection_gap_interval(
            record.result(f"results/{sub.submission_id}.json"),
            record.result("results/baseline.json"), final_sub, final_base_result)
    return FinalSplit(
        submission=sid(sub.submission_id) if sub.submission_id is not None else None,
        score=final, baseline=final_base, n_items=sub.n_items or base.n_items,
        feedback_score=feedback, feedback_baseline=feedback_base,
        feedback_improvement=None if None in (feedback, feedback_base)
        else round(feedback - feedback_base, 6),
        final_improvement=None if None in (final, final_base) else round(final - final_base, 6),
        selection_gap=gap, selection_gap_interval=gap_interval,
        selection_gap_statement=gap_statement(gap_interval), paired_interval=paired,
        statement=statement(paired) if paired else None)


def _differences(sub: dict[str, Any] | None, base: dict[str, Any] | None) -> list[float]:
    a, b = item_scores(sub), item_scores(base)
    return [100.0 * (a[i] - b[i]) for i in sorted(set(a) & set(b))]


def selection_gap_interval(feedback_sub, feedback_base, final_sub, final_base,
                           seed: int = INTERVAL_SEED) -> DifferenceInterval | None:
    """The interval of the selection gap: the per-item gains on the feedback items and on the
    final items are two independent samples (a2c.intervals.difference_interval). A gap inside it
    is what two halves of the held-out set differ by anyway; outside it, selection shows."""
    fb, fin = _differences(feedback_sub, feedback_base), _differences(final_sub, final_base)
    if len(fb) < 2 or len(fin) < 2:
        return None
    return DifferenceInterval.of(difference_interval(fb, fin, seed=seed))


def gap_statement(interval: DifferenceInterval | None) -> str | None:
    if not interval or interval.ci95 is None:
        return None
    lo, hi = interval.ci95
    where = f"{interval.difference:+.1f} points, 95% interval [{lo:+.1f}, {hi:+.1f}]"
    if interval.outside_noise:
        return f"{where}: outside what two halves of the items differ by (selection shows)"
    return f"{where}: within what two halves of the items differ by"


# the weights' comparison (a2c.contracts.provenance.WeightChange) as the report shows it
WEIGHT_COLUMNS = ("changed_fraction", "median_relative_change", "max_relative_change",
                  "max_group")


@dataclass
class ProvenanceRow(Record):
    """The report's row of one valid submission's provenance check."""

    id: str
    not_derived: Any
    same_architecture: Any
    same_tokenizer: Any
    changed_fraction: Any
    median_relative_change: Any
    max_relative_change: Any
    max_group: Any
    reasons: list[Any]


def provenance_rows(record: RunRecord) -> list[ProvenanceRow]:
    """One row per valid submission whose results file holds a provenance check."""
    rows = []
    for sub in record.submissions:
        if not sub.valid or not sub.result_file:
            continue
        result = ResultFile.of(record.result(sub.result_file))
        raw = result.provenance if result else None
        if not isinstance(raw, dict):
            continue
        prov = Provenance.from_dict(raw)   # the grader's own record of the check
        # the weights' comparison, None where the check wrote none (a tensor mismatch)
        weights = prov.weights if isinstance(prov.weights, dict) else {}
        rows.append(ProvenanceRow(
            id=sub.id, not_derived=prov.not_derived, same_architecture=prov.same_architecture,
            same_tokenizer=prov.same_tokenizer, reasons=list(prov.reasons or []),
            **{column: weights.get(column) for column in WEIGHT_COLUMNS}))
    return rows


def provenance(record: RunRecord) -> ProvenanceSection:
    rows = provenance_rows(record)
    return ProvenanceSection(rows=tuple(rows), not_derived=tuple(r.id for r in rows
                                                                if r.not_derived))


@dataclass(frozen=True)
class TrustSections:
    """The report's `improvement`, `final_split` and `provenance` sections."""

    improvement: Improvement
    final_split: FinalSplit | None
    provenance: ProvenanceSection


def trust_sections(record: RunRecord, best_id: str | None) -> TrustSections:
    best, paired = _paired(record, best_id)
    return TrustSections(Improvement(submission=best_id, paired_interval=paired,
                                     statement=statement(paired) if best else None),
                         final_split(record), provenance(record))


def _paired(record: RunRecord, best_id: str | None
            ) -> tuple[dict[str, Any] | None, PairedInterval | None]:
    """(the best submission's results, its paired interval against the baseline's)."""
    best = None
    if best_id is not None:
        row = next((s for s in record.submissions if s.id == best_id), None)
        if row is not None and row.result_file:
            best = record.result(row.result_file)
    paired = PairedInterval.of(paired_improvement(best, record.result("results/baseline.json"))) \
        if best else None
    return best, paired


# ----------------------------------------------------------------------------- leaderboard
LEADERBOARD_COLUMNS = ("final", "selection_gap", "not_derived")


def leaderboard_values(record: RunRecord, subs: list[SubmissionRow]) -> dict[str, Any]:
    """One run's leaderboard values: `final` (the final split's score, None without one),
    `selection_gap` and `not_derived` (how many of its submissions are not derived from the
    base)."""
    final = final_split(record) or FinalSplit()
    return {"final": final.score, "selection_gap": final.selection_gap,
            "not_derived": sum(1 for r in provenance_rows(record) if r.not_derived)}


def improvement_paired(record: RunRecord, subs: list[SubmissionRow]) -> PairedInterval | None:
    """The paired interval of a run's best − baseline (a leaderboard group of one shows it)."""
    valid = [s for s in subs if s.counted]
    best = max(valid, key=lambda s: (s.score, -s.index), default=None)
    return _paired(record, best.id if best else None)[1]


def group_improvement(improvements: list[float | None], paired: PairedInterval | None = None,
                      seed: int = INTERVAL_SEED) -> GroupInterval | None:
    """A leaderboard group's improvement interval: across its runs (seeds), the interval of the
    mean improvement (a2c.intervals.improvement_interval); a group of one run has its paired
    interval over items (`paired`) instead."""
    values = [v for v in improvements if v is not None]
    if len(values) >= 2:
        return GroupInterval.from_dict(improvement_interval(values, seed=seed))
    if len(improvements) == 1 and paired:
        return GroupInterval.of_paired(paired)
    return None
