"""The score-over-time plot of a report: its geometry (pixel coordinates, ticks, the best-so-far
step line, baseline and deadline), computed here so that ``templates/plot.svg.j2`` stays
declarative, and the standalone SVG (``score_over_time.svg``); report.html inlines the same plot.
"""

from __future__ import annotations

import math
from typing import Any

from .templating import duration, environment

W, H = 860, 340
M = {"left": 56, "right": 20, "top": 18, "bottom": 44}


def _nice_step(span: float, target: int) -> float:
    raw = span / max(1, target)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * power:
            return mult * power
    return 10 * power


def plot_geometry(report: dict[str, Any]) -> dict[str, Any]:
    """Pixel geometry of the score-over-time plot (consumed by templates/plot.svg.j2)."""
    subs = report["submissions"]
    baseline = report["scores"]["baseline"]
    span = report["run"]["agent_time_s"] or report["run"]["duration_s"] or 0.0
    times = [s["t_s"] for s in subs if s["t_s"] is not None]
    budget = (report["run"]["budget"] or {}).get("wall_clock_s")
    x_max = max([span, *times, 1.0])
    deadline_t = float(budget) if isinstance(budget, (int, float)) else None
    if deadline_t is not None and deadline_t <= x_max * 1.25:
        x_max = max(x_max, deadline_t)
    values = [s["score"] for s in subs if s["valid"] and s["score"] is not None]
    for s in subs:
        if s["valid"] and s["ci95"]:
            values.extend(s["ci95"])
    if baseline is not None:
        values.append(baseline)
    lo, hi = (min(values), max(values)) if values else (0.0, 100.0)
    pad = max(2.0, (hi - lo) * 0.12)
    y_lo, y_hi = max(0.0, lo - pad), min(100.0, hi + pad)
    if y_hi - y_lo < 5:
        y_lo, y_hi = max(0.0, y_lo - 2.5), min(100.0, y_hi + 2.5)
    y_step = _nice_step(y_hi - y_lo, 5)
    y_lo = math.floor(y_lo / y_step) * y_step
    y_hi = math.ceil(y_hi / y_step) * y_step
    unit, scale = ("s", 1.0) if x_max < 180 else ("min", 60.0) if x_max < 3 * 3600 else \
        ("h", 3600.0)
    x_step = _nice_step(x_max / scale, 8) * scale
    pw = W - M["left"] - M["right"]
    ph = H - M["top"] - M["bottom"]

    def px(t: float) -> float:
        return round(M["left"] + pw * t / x_max, 2)

    def py(v: float) -> float:
        v = min(max(v, y_lo), y_hi)
        return round(M["top"] + ph * (1 - (v - y_lo) / (y_hi - y_lo)), 2)

    points = []
    best_path = []
    for s in subs:
        t = s["t_s"] if s["t_s"] is not None else 0.0
        x = px(t)
        label = f"#{s['index']} (id {s['id']}) at {duration(t)}: "
        if s["valid"] and s["score"] is not None:
            label += f"score {s['score']:.2f}"
            if s["ci95"]:
                label += f" [{s['ci95'][0]:.1f}, {s['ci95'][1]:.1f}]"
            if s["base_copy"]:
                label += " (copy of the base model)"
            point = {"id": s["id"], "index": s["index"], "x": x, "y": py(s["score"]),
                     "valid": True, "label": label, "improved": s["improved"],
                     "base_copy": s["base_copy"],
                     "ci": [py(s["ci95"][1]), py(s["ci95"][0])] if s["ci95"] else None}
        else:
            label += "invalid" + (f": {s['error']}" if s["error"] else "")
            point = {"id": s["id"], "index": s["index"], "x": x, "y": M["top"] + ph - 9,
                     "valid": False, "label": label[:300], "improved": False, "ci": None,
                     "base_copy": s["base_copy"]}
        points.append(point)
        if s["best_so_far"] is not None:
            y = py(s["best_so_far"])
            if best_path:
                best_path.append(f"{x},{best_path[-1].split(',')[1]}")
            best_path.append(f"{x},{y}")
    if best_path:
        best_path.append(f"{px(x_max)},{best_path[-1].split(',')[1]}")
    x_ticks = []
    t = 0.0
    while t <= x_max + 1e-9:
        value = t / scale
        x_ticks.append({"x": px(t), "label": f"{value:g}"})
        t += x_step
    y_ticks = []
    v = y_lo
    while v <= y_hi + 1e-9:
        y_ticks.append({"y": py(v), "label": f"{v:g}"})
        v += y_step
    return {
        "width": W, "height": H, "left": M["left"], "top": M["top"],
        "right": W - M["right"], "bottom": H - M["bottom"],
        "points": points, "best_path": " ".join(best_path),
        "baseline_y": py(baseline) if baseline is not None else None,
        "baseline": baseline,
        "deadline_x": px(deadline_t) if deadline_t is not None and deadline_t <= x_max else None,
        "x_ticks": x_ticks, "y_ticks": y_ticks, "x_unit": unit,
        "n_valid": sum(1 for p in points if p["valid"]),
        "n_invalid": sum(1 for p in points if not p["valid"]),
    }


def render_svg(report: dict[str, Any], standalone: bool = True) -> str:
    """The plot as an SVG document (`standalone`) or as an element to inline in HTML."""
    return environment().get_template("plot.svg.j2").render(plot=plot_geometry(report),
                                                             standalone=standalone)
