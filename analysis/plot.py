"""The score-over-time plot of a report: its geometry (pixel coordinates, ticks, the best-so-far
step line, baseline and deadline), computed here so that ``templates/plot.svg.j2`` stays
declarative, and the standalone SVG (``score_over_time.svg``); report.html inlines the same plot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .report_doc import Report
from .rows import SubmissionRow
from .templating import duration, environment

W, H = 860, 340


@dataclass(frozen=True)
class Margins:
    left: int = 56
    right: int = 20
    top: int = 18
    bottom: int = 44


M = Margins()


def _nice_step(span: float, target: int) -> float:
    raw = span / max(1, target)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * power:
            return mult * power
    return 10 * power


@dataclass(frozen=True)
class _Frame:
    """The plot's axes: time 0..x_max across, score y_lo..y_hi up."""

    x_max: float
    y_lo: float
    y_hi: float

    @property
    def width(self) -> int:
        return W - M.left - M.right

    @property
    def height(self) -> int:
        return H - M.top - M.bottom

    def px(self, t: float) -> float:
        return round(M.left + self.width * t / self.x_max, 2)

    def py(self, v: float) -> float:
        v = min(max(v, self.y_lo), self.y_hi)
        return round(M.top + self.height * (1 - (v - self.y_lo) / (self.y_hi - self.y_lo)), 2)


def _time_span(report: Report, rows: list[SubmissionRow]) -> tuple[float, float | None]:
    """(the time axis' end, the deadline when it falls near enough to show)."""
    run = report.run
    span = run.agent_time_s or run.duration_s or 0.0
    budget = (run.budget or {}).get("wall_clock_s")
    x_max = max([span, *(r.t_s for r in rows if r.t_s is not None), 1.0])
    deadline_t = float(budget) if isinstance(budget, (int, float)) else None
    if deadline_t is not None and deadline_t <= x_max * 1.25:
        x_max = max(x_max, deadline_t)
    return x_max, deadline_t


def _score_range(rows: list[SubmissionRow], baseline: float | None) -> tuple[float, float, float]:
    """(y_lo, y_hi, y_step): every valid score and interval and the baseline, padded."""
    values = [r.score for r in rows if r.valid and r.score is not None]
    for r in rows:
        if r.valid and r.ci95:
            values.extend(r.ci95)
    if baseline is not None:
        values.append(baseline)
    lo, hi = (min(values), max(values)) if values else (0.0, 100.0)
    pad = max(2.0, (hi - lo) * 0.12)
    y_lo, y_hi = max(0.0, lo - pad), min(100.0, hi + pad)
    if y_hi - y_lo < 5:
        y_lo, y_hi = max(0.0, y_lo - 2.5), min(100.0, y_hi + 2.5)
    y_step = _nice_step(y_hi - y_lo, 5)
    return math.floor(y_lo / y_step) * y_step, math.ceil(y_hi / y_step) * y_step, y_step


def _point(r: SubmissionRow, frame: _Frame) -> dict[str, Any]:
    t = r.t_s if r.t_s is not None else 0.0
    x = frame.px(t)
    label = f"#{r.index} (id {r.id}) at {duration(t)}: "
    if r.valid and r.score is not None:
        label += f"score {r.score:.2f}"
        if r.ci95:
            label += f" [{r.ci95[0]:.1f}, {r.ci95[1]:.1f}]"
        if r.base_copy:
            label += " (copy of the base model)"
        return {"id": r.id, "index": r.index, "x": x, "y": frame.py(r.score),
                "valid": True, "label": label, "improved": r.improved,
                "base_copy": r.base_copy,
                "ci": [frame.py(r.ci95[1]), frame.py(r.ci95[0])] if r.ci95 else None}
    label += "invalid" + (f": {r.error}" if r.error else "")
    return {"id": r.id, "index": r.index, "x": x, "y": M.top + frame.height - 9,
            "valid": False, "label": label[:300], "improved": False, "ci": None,
            "base_copy": r.base_copy}


def _best_path(rows: list[SubmissionRow], frame: _Frame) -> str:
    """The best-so-far step line, to the right edge."""
    path: list[tuple[float, float]] = []
    for r in rows:
        if r.best_so_far is not None:
            x = frame.px(r.t_s if r.t_s is not None else 0.0)
            if path:
                path.append((x, path[-1][1]))
            path.append((x, frame.py(r.best_so_far)))
    if path:
        path.append((frame.px(frame.x_max), path[-1][1]))
    return " ".join(f"{x},{y}" for x, y in path)


def _ticks(start: float, stop: float, step: float) -> list[float]:
    out = []
    value = start
    while value <= stop + 1e-9:
        out.append(value)
        value += step
    return out


def plot_geometry(report: Report) -> dict[str, Any]:
    """Pixel geometry of the score-over-time plot (consumed by templates/plot.svg.j2)."""
    rows = list(report.submissions)
    baseline = report.scores.baseline
    x_max, deadline_t = _time_span(report, rows)
    y_lo, y_hi, y_step = _score_range(rows, baseline)
    unit, scale = ("s", 1.0) if x_max < 180 else ("min", 60.0) if x_max < 3 * 3600 else \
        ("h", 3600.0)
    x_step = _nice_step(x_max / scale, 8) * scale
    frame = _Frame(x_max, y_lo, y_hi)
    points = [_point(r, frame) for r in rows]
    valid = sum(1 for r, p in zip(rows, points) if r.valid and r.score is not None)
    return {
        "width": W, "height": H, "left": M.left, "top": M.top,
        "right": W - M.right, "bottom": H - M.bottom,
        "points": points, "best_path": _best_path(rows, frame),
        "baseline_y": frame.py(baseline) if baseline is not None else None,
        "baseline": baseline,
        "deadline_x": frame.px(deadline_t) if deadline_t is not None and deadline_t <= x_max
        else None,
        "x_ticks": [{"x": frame.px(t), "label": f"{t / scale:g}"}
                    for t in _ticks(0.0, x_max, x_step)],
        "y_ticks": [{"y": frame.py(v), "label": f"{v:g}"} for v in _ticks(y_lo, y_hi, y_step)],
        "x_unit": unit, "n_valid": valid, "n_invalid": len(points) - valid,
    }


def render_svg(report: Report, standalone: bool = True) -> str:
    """The plot as an SVG document (`standalone`) or as an element to inline in HTML."""
    return environment().get_template("plot.svg.j2").render(plot=plot_geometry(report),
                                                             standalone=standalone)
