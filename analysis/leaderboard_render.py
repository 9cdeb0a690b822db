"""The leaderboard as a reader sees it (analysis/leaderboard.py builds it): each group's cells
as text (a mean, its spread, the improvement's interval and marker), the page's compact
columns, and the table rendered as Markdown, HTML (templates/leaderboard*.j2) or CSV.
"""

from __future__ import annotations

import csv
import io

from a2c.errors import A2CError

from .board import Group, Leaderboard, Stat
from .formats import LEADERBOARD_FORMATS
from .templating import duration, environment
from .trust import LEADERBOARD_COLUMNS

COLUMNS = ("baseline", "best", "improvement", *LEADERBOARD_COLUMNS, "submissions", "valid",
           "time_to_best_s", "tokens", "cost_usd", "cost_per_point")
MONEY = ("cost_usd", "cost_per_point")


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _money(value: float) -> str:
    return f"${value:.4f}" if abs(value) < 1 else f"${value:.2f}"


def _formatter(column: str):
    if column.endswith("_s"):
        return duration
    if column in ("submissions", "valid", "tokens", "not_derived"):
        return _count
    return _money if column in MONEY else (lambda v: f"{v:.2f}")


def _fmt_parts(stat: Stat, column: str = "") -> tuple[str, str | None]:
    """(the mean, its spread 'std (min–max)' or None for one value)."""
    if stat.mean is None:
        return "—", None
    one = _formatter(column)
    if stat.n <= 1 or stat.std is None:
        return one(stat.mean), None
    return one(stat.mean), f"{one(stat.std)} ({one(stat.min)}–{one(stat.max)})"


def _fmt(stat: Stat, column: str = "") -> str:
    mean, spread = _fmt_parts(stat, column)
    return mean if spread is None else f"{mean} ± {spread}"


def display_columns(board: Leaderboard) -> list[str]:
    """The table's columns: the grouping keys, the other settings that vary between its rows
    (a budget, a base model), runs, the values, the improvement's interval after it."""
    columns = [*board.by, *(["budget"] if "budget" not in board.by else []),
               *(k for k in board.varying if k != "budget"), "runs", *COLUMNS]
    columns.insert(columns.index("improvement") + 1, "improvement_ci")
    return columns


def rows_for_display(board: Leaderboard) -> list[dict[str, str]]:
    """Each group's cells as text, keyed by column."""
    out = []
    for g in board.groups:
        row = dict(g.key)
        row.update({k: "—" if v is None else str(v) for k, v in g.labels.items()})
        notes = [f"{g.unverified} unverified"] if g.unverified else []
        notes += [g.repeats] if g.repeats else []
        notes += [f"{len(g.contaminated)} contaminated"] if g.contaminated else []
        row["runs"] = str(g.runs) + (f" ({'; '.join(notes)})" if notes else "")
        for column in COLUMNS:
            row[column] = _fmt(g.stats[column], column)
        row.update(interval_cells(g))
        out.append(row)
    return out


def interval_cells(group: Group) -> dict[str, str]:
    """The improvement's marker (`*`: its interval excludes 0) and the interval's cell: across
    seeds the interval of the mean improvement, for one run the paired interval over items."""
    iv = group.improvement_interval
    cell = "—"
    if not iv and str(group.repeats or "").startswith("repeats of seed"):
        cell = f"— ({group.repeats}: no interval across seeds)"
    if iv and iv.ci95:
        cell = f"[{iv.ci95[0]:+.2f}, {iv.ci95[1]:+.2f}] ({iv.over}, {iv.method})"
    marker = iv.marker if iv else ""
    return {"improvement_ci": cell,
            "improvement": group_cell(group, "improvement") + (f" {marker}" if marker else "")}


def group_cell(group: Group, column: str) -> str:
    return _fmt(group.stats[column])


OPTIONAL = ("final", "selection_gap", "tokens", "cost_usd", "cost_per_point")


def compact_columns(board: Leaderboard) -> list[str]:
    """The page's columns: display_columns without the optional ones no group has a value in
    (no final split, no driver calls), so that the table fits a 1280-px page."""
    empty = {c for c in OPTIONAL if all(g.stats[c].mean is None for g in board.groups)}
    return [c for c in display_columns(board) if c not in empty]


def compact_cells(board: Leaderboard) -> list[dict[str, dict[str, str | None]]]:
    """Each row's cells as {main, sub} for the HTML tables: the mean on the first line, the
    spread ('± std · min–max', left out when every run gave the same value) or the interval's
    method on a second, smaller one."""
    out = []
    for g, text in zip(board.groups, rows_for_display(board)):
        row = {c: {"main": v, "sub": None} for c, v in text.items()}
        for column in COLUMNS:
            stat = g.stats[column]
            mean, _ = _fmt_parts(stat, column)
            sub = None
            if stat.n > 1 and stat.std and stat.min != stat.max:
                one = _formatter(column)
                sub = f"± {one(stat.std)} · {one(stat.min)}–{one(stat.max)}"
            row[column] = {"main": mean, "sub": sub}
        marker = g.improvement_interval.marker if g.improvement_interval else ""
        if marker:
            row["improvement"]["main"] += f" {marker}"
        for column, at in (("improvement_ci", " ("), ("runs", " (")):
            main, _, rest = text[column].partition(at)
            row[column] = {"main": main, "sub": rest[:-1] if rest else None}
        out.append(row)
    return out


HEADINGS = {"baseline": "baseline", "best": "best", "improvement": "improvement",
            "improvement_ci": "improvement 95% CI", "final": "final split",
            "selection_gap": "selection gap", "not_derived": "not derived",
            "submissions": "submissions", "valid": "valid", "time_to_best_s": "time to best",
            "runs": "runs", "tokens": "tokens", "cost_usd": "cost (USD)",
            "cost_per_point": "cost per point", "budget": "budget", "model": "base model",
            "agent_params": "agent params", "driver_weights": "driver weights"}


def _csv_value(column: str, value: float) -> str:
    if column == "tokens":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    if column in MONEY:
        return f"{value:.6g}"
    return f"{value:.4g}"


def render_leaderboard(board: Leaderboard, fmt: str = "md") -> str:
    if fmt == "csv":
        return _csv(board)
    template = {"md": "leaderboard.md.j2", "html": "leaderboard.html.j2"}.get(fmt)
    if template is None:
        raise A2CError(f"--format: unknown format {fmt!r}; choose {', '.join(LEADERBOARD_FORMATS)}")
    return environment().get_template(template).render(
        board=board, rows=rows_for_display(board),
        columns=display_columns(board) if fmt == "md" else board.columns,
        headings={**HEADINGS, **{k: k for k in board.by}})


CSV_INTERVAL = ("improvement_ci95_low", "improvement_ci95_high", "improvement_ci_over",
                "improvement_ci_method", "improvement_ci_n", "improvement_ci_excludes_0")


def _interval_csv(group: Group) -> list[str]:
    """The interval the table shows, as CSV cells (blank where it has none)."""
    iv = group.improvement_interval
    if not iv or not iv.ci95:
        return [""] * len(CSV_INTERVAL)
    low, high = iv.ci95
    return [f"{low:.6g}", f"{high:.6g}", iv.over or "", iv.method or "",
            "" if iv.n is None else str(iv.n),
            "" if iv.outside_noise is None else str(bool(iv.outside_noise)).lower()]


def _csv(board: Leaderboard) -> str:
    """One row per group: the --by keys (labels for a budget), the budget and its wall clock in
    seconds, the other settings that split rows, runs, then each statistic of each column, the
    improvement's 95% interval after the improvement's."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    stats = ("mean", "std", "min", "max")
    varying = [k for k in board.varying if k != "budget"]
    values = [f"{c}_{s}" for c in COLUMNS for s in stats]
    at = values.index("improvement_max") + 1
    header = [*(k for k in board.by if k != "budget"), "budget", "budget_wall_clock_s",
              *varying, "runs", *values[:at], *CSV_INTERVAL, *values[at:]]
    writer.writerow(header)
    for g in board.groups:
        cells = ["" if v is None else _csv_value(c, v) for c in COLUMNS
                 for v in g.stats[c].summary]
        writer.writerow([*("" if v == "—" else v for k, v in g.key.items() if k != "budget"),
                         g.labels.get("budget") or "",
                         "" if g.wall_clock_s is None else f"{g.wall_clock_s:g}",
                         *(g.labels.get(k) or "" for k in varying), g.runs,
                         *cells[:at], *_interval_csv(g), *cells[at:]])
    return buffer.getvalue()
