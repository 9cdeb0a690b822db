"""The Jinja environment every analysis page is rendered with (``analysis/templates``,
StrictUndefined, autoescaped HTML and SVG) and the formatting filters the templates use."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).resolve().parent / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             undefined=jinja2.StrictUndefined,
                             autoescape=lambda name: bool(name) and name.endswith((".html.j2", ".svg.j2")),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["dur"] = duration
    env.filters["num"] = number
    env.filters["pct"] = percent
    env.filters["short"] = lambda v, n=12: "—" if v is None else str(v)[:n]
    env.filters["mdcell"] = md_cell
    env.filters["d"] = lambda v: "—" if v is None or v == "" else v
    env.filters["tojson_compact"] = lambda v: json.dumps(v, ensure_ascii=False)
    return env


def duration(seconds: Any) -> str:
    """Seconds for a reader at a glance: '45 s', '12.5 min', '3.20 h' ('—' for None).

    (Not `a2c.durations.format_duration`, whose exact '1h02m05s' suits logs and limits; report
    pages round to the unit that fits.)"""
    if seconds is None:
        return "—"
    s = float(seconds)
    if abs(s) < 120:
        return f"{s:.0f} s" if s == int(s) else f"{s:.1f} s"
    if abs(s) < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def percent(value: Any) -> str:
    return "—" if value is None else f"{100 * float(value):.0f}%"


def md_cell(value: Any) -> str:
    text = "—" if value is None or value == "" else str(value)
    return text.replace("|", "\\|").replace("\n", " ")
