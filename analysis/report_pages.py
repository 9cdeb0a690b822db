"""A report dict as pages for people: Markdown (``report.md``, linking the plot's SVG) and one
self-contained HTML page (``report.html``, the plot inlined). All markup is in
``analysis/templates``; the numbers come from report.json unchanged."""

from __future__ import annotations

from typing import Any

from .plot import render_svg
from .templating import environment


def render_markdown(report: dict[str, Any], svg_name: str | None = "score_over_time.svg") -> str:
    return environment().get_template("report.md.j2").render(r=report, svg_name=svg_name)


def render_html(report: dict[str, Any]) -> str:
    return environment().get_template("report.html.j2").render(
        r=report, plot_svg=render_svg(report, standalone=False))
