"""Process metrics: how the agent got to its score (the report's `metrics`; definitions in
docs/analysis.md) — validity, time to first improvement and to best, monotonicity, rank
correlation of score with submission order, budget and submissions used."""

from __future__ import annotations

import itertools
import math
import statistics

from .record import RunRecord
from .report_doc import ProcessMetrics
from .rows import SubmissionRow
from .summary import RunHeader
from .values import finite, rounded


def _best(counted: list[SubmissionRow]) -> SubmissionRow | None:
    """The earliest submission reaching the best score."""
    if not counted:
        return None
    top = max(counted, key=lambda s: (s.score, -s.index))
    return next(s for s in counted if s.score == top.score)


def _rank_correlation(scores: list[float]) -> float | None:
    if len(scores) >= 3 and len(set(scores)) > 1:
        return _pearson(list(range(1, len(scores) + 1)), _ranks(scores))
    return None


def process_metrics(record: RunRecord, rows: list[SubmissionRow], baseline: float | None,
                    header: RunHeader) -> ProcessMetrics:
    """`rows` are the report's submission rows, `header` its run header."""
    n = len(rows)
    counted = [s for s in rows if s.counted]
    first_valid = counted[0] if counted else None
    best = _best(counted)
    first_improvement = next((s for s in counted if baseline is not None
                              and s.score is not None and s.score > baseline), None)
    scores = [s.score for s in counted if s.score is not None]
    pairs = list(itertools.pairwise(scores))
    monotonicity = (sum(1 for a, b in pairs if b >= a) / len(pairs)) if pairs else None
    budget = record.budget or {}
    wall = finite(budget.get("wall_clock_s"))
    duration = header.agent_time_s
    if duration is None:
        duration = header.duration_s
    max_subs = budget.get("max_submissions")
    last_t = max((s.t_s for s in rows if s.t_s is not None), default=None)
    gap = None
    if last_t is not None and duration is not None:
        gap = round(max(0.0, duration - last_t), 3)
    valid = sum(1 for s in rows if s.valid)
    return ProcessMetrics(
        n_submissions=n, n_valid=valid, n_invalid=n - valid,
        valid_submission_rate=rounded(valid / n) if n else None,
        first_valid_index=first_valid.index if first_valid else None,
        first_valid_delay_s=first_valid.t_s if first_valid else None,
        first_improvement_index=first_improvement.index if first_improvement else None,
        time_to_first_improvement_s=first_improvement.t_s if first_improvement else None,
        best_index=best.index if best else None,
        time_to_best_s=best.t_s if best else None,
        n_improvements=sum(1 for s in rows if s.improved),
        monotonicity=rounded(monotonicity),
        rank_correlation=rounded(_rank_correlation(scores)),
        base_model_copies=sum(1 for s in rows if s.base_copy),
        duplicates=sum(1 for s in rows if s.duplicate_of and not s.base_copy),
        run_duration_s=header.duration_s,
        agent_time_s=duration,
        budget_used_share=rounded(duration / wall) if duration is not None and wall else None,
        submissions_used_share=rounded(n / max_subs)
        if isinstance(max_subs, int) and max_subs else None,
        gap_last_submission_to_end_s=gap,
        n_snapshots=len({s.commit for s in record.snapshot_taken}),
    )


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    return sxy / (sx * sy) if sx and sy else None
