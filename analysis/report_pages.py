"""A report dict as pages for people: Markdown (``report.md``, linking the plot's SVG) and one
self-contained HTML page (``report.html``, the plot inlined). All markup is in
``analysis/templates``; the numbers come from report.json unchanged."""

from __future__ import annotations

from typing import Any

from .narrate import TITLES
from .plot import render_svg
from .report_doc import Report
from .templating import environment


def render_markdown(report: dict[str, Any], svg_name: str | None = "score_over_time.svg",
                    analysis: dict[str, Any] | None = None) -> str:
    """`analysis`: the layer outside the signed record (narrate.read_layer), shown last."""
    return environment().get_template("report.md.j2").render(
        r=report, svg_name=svg_name, analysis_layer=_layer(analysis), titles=TITLES)


def render_html(report: dict[str, Any], analysis: dict[str, Any] | None = None) -> str:
    return environment().get_template("report.html.j2").render(
        r=report, plot_svg=render_svg(Report.from_dict(report), standalone=False),
        analysis_layer=_layer(analysis),
        titles=TITLES)


def _layer(analysis: dict[str, Any] | None) -> dict[str, Any]:
    return {"narrative": None, "review": None, **(analysis or {})}
