"""Length-controlled win rate, the AlpacaEval 2.0 way, with numpy only.

AlpacaEval fits a logistic regression (a GLM) of the judge's preference for the model over the
baseline on
    theta  (the model's intercept)
  + phi * tanh(delta_len / std(delta_len))          (the length term, delta = len(base) - len(model))
  + psi * instruction_difficulty                     (when a difficulty per instruction is known)
with the preference as a soft label in [0, 1] (ties are 0.5), and reports the mean predicted
preference with the length term set to zero, x 100.

Differences from the reference implementation (`alpaca_eval.metrics.glm_winrate`), which needs
hub data: the instruction difficulties and the "gamed" baselines it regularises towards are only
used when a record carries `instruction_difficulty`; the penalty is a fixed ridge (L2) instead of
L1 with a cross-validated strength. With no length variation at all, the length term is not
identifiable and the result approaches the raw win rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class LengthControlled:
    """The win rates (0-100) and the fitted coefficients by term name (model, length,
    instruction_difficulty); `lc_win_rate` None when the grader does not control for length."""

    win_rate: float
    lc_win_rate: float | None
    coefficients: dict[str, float] = field(default_factory=dict)
    length_std: float = 0.0
    l2: float = 1.0


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


def fit_soft_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 100,
                      tol: float = 1e-10) -> np.ndarray:
    """Ridge-penalised logistic regression with soft labels y in [0, 1], by Newton's method."""
    d = X.shape[1]
    beta = np.zeros(d)
    eye = np.eye(d)
    for _ in range(iters):
        p = _sigmoid(X @ beta)
        grad = X.T @ (p - y) + l2 * beta
        w = p * (1.0 - p)
        hess = (X * w[:, None]).T @ X + l2 * eye
        step = np.linalg.solve(hess, grad)
        beta -= step
        if float(np.max(np.abs(step))) < tol:
            break
    return beta


def length_controlled_winrate(preferences: Sequence[float], len_model: Sequence[float],
                              len_baseline: Sequence[float],
                              instruction_difficulty: Sequence[float] | None = None,
                              l2: float = 1.0) -> LengthControlled:
    """`preferences[i]` = P(model preferred over baseline on item i), in [0, 1]."""
    y = np.asarray(preferences, dtype=float)
    if y.size == 0:
        return LengthControlled(win_rate=0.0, lc_win_rate=0.0, l2=l2)
    delta = np.asarray(len_baseline, dtype=float) - np.asarray(len_model, dtype=float)
    std = float(delta.std(ddof=1)) if delta.size > 1 else 0.0
    length_term = np.tanh(delta / std) if std > 0 else np.zeros_like(delta)
    cols = [np.ones_like(y), length_term]
    names = ["model", "length"]
    if instruction_difficulty is not None:
        cols.append(np.asarray(instruction_difficulty, dtype=float))
        names.append("instruction_difficulty")
    X = np.stack(cols, axis=1)
    beta = fit_soft_logistic(X, y, l2=l2)
    X0 = X.copy()
    X0[:, 1] = 0.0  # what the judge would prefer with no length difference
    lc = float(_sigmoid(X0 @ beta).mean() * 100.0)
    return LengthControlled(win_rate=float(y.mean() * 100.0), lc_win_rate=lc,
                            coefficients={k: float(v) for k, v in zip(names, beta)},
                            length_std=std, l2=l2)
