"""Percentile bootstrap confidence interval of a mean over items.

A difference of a few points between two submissions means little on 82 items; the interval says
how much. Resampling is over items, with an explicit seed so the same items give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0


def bootstrap_ci(values: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED, confidence: float = 0.95,
                 scale: float = 100.0) -> tuple[float, float]:
    """The percentile bootstrap interval of `scale * mean(values)`.

    `values` are per-item scores (e.g. 0/1 verdicts, or fractions). No items gives (0, 0); one item
    (or identical items) gives a zero-width interval at the mean.
    """
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(n_resamples, data.size))
    means = data[idx].mean(axis=1) * scale
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(round(lo, 6)), float(round(hi, 6)))


def mean_score(values: Sequence[float], scale: float = 100.0) -> float:
    data = [float(v) for v in values]
    return float(scale * sum(data) / len(data)) if data else 0.0
