"""Confidence intervals the record and the report give, all from `scipy.stats` (a maintained
implementation, not a resampler of our own), each with a stated seed so the same items give the
same interval on every machine.

- `mean_interval(values, seed)`: a score's interval (percentile bootstrap over items; what every
  GradeResult's `ci95` holds).
- `paired_interval(a, b, seed)`: the interval of mean(a − b) over the *same* items (paired
  resampling, BCa). Why paired: two models scored on the same items share the items' difficulty;
  resampling the differences removes it, so the interval of an improvement is much narrower than
  the two scores' intervals suggest, and honest about it.
- `improvement_interval(values, seed)`: across runs (seeds), the interval of the mean improvement.
  With fewer than `MIN_BOOTSTRAP` values a bootstrap can draw only a handful of distinct samples
  and understates the spread, so it is Student's t interval there, BCa above.

This module sits in the bottom layer (like `canonical.py`): the graders (runtime) and the report
and leaderboard (analysis) share it. scipy is imported inside the functions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
INTERVAL_SEED = 0     # the seed of an improvement's interval, in `a2c check` and the report alike
CONFIDENCE = 0.95
MIN_BOOTSTRAP = 10


def _round(x: float) -> float:
    return float(round(float(x), 6))


def mean_interval(values: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES,
                  seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE,
                  scale: float = 100.0) -> tuple[float, float]:
    """The percentile bootstrap interval of `scale * mean(values)` (scipy.stats.bootstrap).
    No items: (0, 0); one item or identical items: a zero-width interval at the mean."""
    import numpy as np
    from scipy import stats

    data = np.asarray(list(values), dtype=float) * scale
    if data.size == 0:
        return (0.0, 0.0)
    if data.size < 2 or np.all(data == data[0]):
        return (_round(data.mean()), _round(data.mean()))
    res = stats.bootstrap((data,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", rng=np.random.default_rng(seed), vectorized=True)
    return (_round(res.confidence_interval.low), _round(res.confidence_interval.high))


def paired_interval(a: Sequence[float], b: Sequence[float], seed: int = DEFAULT_SEED,
                    n_resamples: int = DEFAULT_RESAMPLES, confidence: float = CONFIDENCE,
                    scale: float = 100.0, method: str = "BCa") -> dict[str, Any]:
    """The interval of `scale * mean(a − b)`, a and b scored on the same items in the same order
    (scipy.stats.bootstrap, paired=True). Returns {difference, ci95, method, seed, n_items,
    n_resamples, confidence, outside_noise}: `outside_noise` is True when the interval excludes
    0 (then the sign of the difference is not noise at that confidence)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(list(a), dtype=float) * scale
    y = np.asarray(list(b), dtype=float) * scale
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} and {y.size}")
    out: dict[str, Any] = {"method": method, "seed": seed, "n_items": int(x.size),
                           "n_resamples": n_resamples, "confidence": confidence}
    if x.size == 0:
        return {**out, "difference": None, "ci95": None, "outside_noise": None}
    diff = x - y
    mean = _round(diff.mean())
    if x.size < 2 or np.all(diff == diff[0]):   # no spread: BCa is undefined, the width is 0
        lo = hi = mean
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # DegenerateDataWarning: falls back below
            res = stats.bootstrap((x, y), lambda p, q, axis=-1: np.mean(p - q, axis=axis),
                                  paired=True, vectorized=True, n_resamples=n_resamples,
                                  confidence_level=confidence, method=method,
                                  rng=np.random.default_rng(seed))
        lo, hi = res.confidence_interval.low, res.confidence_interval.high
        if not (math.isfinite(lo) and math.isfinite(hi)):   # BCa degenerate: percentile
            res = stats.bootstrap((x, y), lambda p, q, axis=-1: np.mean(p - q, axis=axis),
                                  paired=True, vectorized=True, n_resamples=n_resamples,
                                  confidence_level=confidence, method="percentile",
                                  rng=np.random.default_rng(seed))
            lo, hi = res.confidence_interval.low, res.confidence_interval.high
            out["method"] = "percentile"
        lo, hi = _round(lo), _round(hi)
    return {**out, "difference": mean, "ci95": [lo, hi], "outside_noise": bool(lo > 0 or hi < 0)}


def improvement_interval(values: Sequence[float], seed: int = DEFAULT_SEED,
                         confidence: float = CONFIDENCE,
                         n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, Any]:
    """The interval of the mean of per-run improvements (e.g. best − baseline of each seed).
    Returns {mean, ci95, n, method, seed, outside_noise}; ci95 None with fewer than 2 values.
    Student's t below `MIN_BOOTSTRAP` values (see the module doc), BCa bootstrap above."""
    import numpy as np
    from scipy import stats

    data = np.asarray([float(v) for v in values if v is not None], dtype=float)
    out: dict[str, Any] = {"n": int(data.size), "seed": seed, "confidence": confidence}
    if data.size == 0:
        return {**out, "mean": None, "ci95": None, "method": None, "outside_noise": None}
    mean = _round(data.mean())
    if data.size < 2:
        return {**out, "mean": mean, "ci95": None, "method": None, "outside_noise": None}
    if np.all(data == data[0]):
        lo = hi = mean
        method = "none (no spread)"
    elif data.size < MIN_BOOTSTRAP:
        sem = float(stats.sem(data))
        lo, hi = stats.t.interval(confidence, data.size - 1, loc=float(data.mean()), scale=sem)
        method = "t"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap((data,), np.mean, n_resamples=n_resamples, vectorized=True,
                                  confidence_level=confidence, method="BCa",
                                  rng=np.random.default_rng(seed))
        lo, hi = res.confidence_interval.low, res.confidence_interval.high
        method = "BCa"
    lo, hi = _round(lo), _round(hi)
    return {**out, "mean": mean, "ci95": [lo, hi], "method": method,
            "outside_noise": bool(lo > 0 or hi < 0)}


def difference_interval(a: Sequence[float], b: Sequence[float], seed: int = DEFAULT_SEED,
                        n_resamples: int = DEFAULT_RESAMPLES, confidence: float = CONFIDENCE
                        ) -> dict[str, Any]:
    """The interval of mean(a) − mean(b) for two *independent* samples (each resampled on its
    own; scipy.stats.bootstrap, percentile). Why: the selection gap compares a gain on the
    feedback items with a gain on other items; even with no selection at all the two halves
    differ by chance, and this interval says by how much. Returns {difference, ci95, method,
    seed, n, outside_noise}."""
    import numpy as np
    from scipy import stats

    x, y = np.asarray(list(a), dtype=float), np.asarray(list(b), dtype=float)
    out: dict[str, Any] = {"method": "percentile", "seed": seed, "n": [int(x.size), int(y.size)],
                           "confidence": confidence}
    if x.size < 2 or y.size < 2:
        return {**out, "difference": None, "ci95": None, "outside_noise": None}
    diff = _round(x.mean() - y.mean())
    res = stats.bootstrap((x, y), lambda p, q, axis=-1: np.mean(p, axis=axis) - np.mean(q, axis=axis),
                          vectorized=True, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", rng=np.random.default_rng(seed))
    lo, hi = _round(res.confidence_interval.low), _round(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo = hi = diff
    return {**out, "difference": diff, "ci95": [lo, hi], "outside_noise": bool(lo > 0 or hi < 0)}


def item_scores(result: dict[str, Any] | None) -> dict[str, float]:
    """{item id: item score in [0, 1]} of a results file (items without an id or a score are
    left out; `correct` counts as 1 or 0 where there is no `score`)."""
    out: dict[str, float] = {}
    for item in (result or {}).get("items") or []:
        if not isinstance(item, dict) or item.get("id") is None:
            continue
        score = item.get("score")
        if score is None and item.get("correct") is not None:
            score = 1.0 if item["correct"] else 0.0
        if isinstance(score, (int, float)):
            out[str(item["id"])] = float(score)
    return out


def paired_improvement(best: dict[str, Any] | None, baseline: dict[str, Any] | None,
                       seed: int = INTERVAL_SEED) -> dict[str, Any] | None:
    """best − baseline (two results files) over their common items: `paired_interval` plus
    `items_only_in_one`; None when either has no per-item scores. The one computation of an
    improvement's interval: `a2c check` prints it and the report records it, so one run gives
    one interval."""
    a, b = item_scores(best), item_scores(baseline)
    common = sorted(set(a) & set(b))
    if not common:
        return None
    out = paired_interval([a[i] for i in common], [b[i] for i in common], seed=seed)
    out["items_only_in_one"] = len(set(a) ^ set(b))
    return out
