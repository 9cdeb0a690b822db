"""A score's confidence interval: the percentile bootstrap of a mean over items.

A difference of a few points between two submissions means little on 82 items; the interval says
how much. The resampling is `scipy.stats.bootstrap` (a2c/intervals.py, shared with the report's
paired interval of an improvement), with an explicit seed so the same items give the same
interval.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2c.intervals import DEFAULT_RESAMPLES, DEFAULT_SEED, mean_interval

__all__ = ["DEFAULT_RESAMPLES", "DEFAULT_SEED", "bootstrap_ci", "mean_score"]


def bootstrap_ci(values: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED, confidence: float = 0.95,
                 scale: float = 100.0) -> tuple[float, float]:
    """The percentile bootstrap interval of `scale * mean(values)` (see a2c.intervals).

    `values` are per-item scores (e.g. 0/1 verdicts, or fractions). No items gives (0, 0); one item
    (or identical items) gives a zero-width interval at the mean.
    """
    return mean_interval(values, n_resamples=n_resamples, seed=seed, confidence=confidence,
                         scale=scale)


def mean_score(values: Sequence[float], scale: float = 100.0) -> float:
    data = [float(v) for v in values]
    return float(scale * sum(data) / len(data)) if data else 0.0
