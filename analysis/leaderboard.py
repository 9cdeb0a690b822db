"""Leaderboards: one table across many runs, grouped (agent × driver × task × mode by default).

Only runs whose record verifies count (``--include-unverified`` overrides; excluded runs are
listed). Per group: number of runs (seeds), baseline, best, improvement (best - baseline),
submissions, valid submissions, time to best, driver tokens (input, output, cache read and
cache write, summed from the gateway's driver_call events, as its totals count them), driver cost (USD) and cost per point of improvement (cost /
(best - baseline); blank for a run that did not improve or called no driver), each as the mean
with its spread (sample standard deviation, min–max) when the group has several runs. And the
trust columns (analysis/trust.py): the final split's score, the selection gap, submissions not
derived from the base model, and the improvement's 95% interval with a `*` marker when it excludes
0 (across a group's seeds the interval of the mean improvement; one run: paired over items).
A row is always one agent's (`agent` is added to `--by`); the budget is always a column, and a
table of several wall-clock budgets is ordered by budget and says they are not comparable. Time
to best is blank for a run whose best never beat its baseline.
"""

from __future__ import annotations

import csv
import io
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.events import EVENTS_FILE
from a2c.contracts.run_info import RUN_JSON
from a2c.errors import A2CError

from .contamination import contamination_section
from .formats import LEADERBOARD_FORMATS
from .grouping import (
    CONFIG_KEYS,
    config_values,
    label_budgets,
    label_table_budgets,
    repeats_note,
    run_state,
    seed_means,
    varying_config,
    wall_clock,
)
from .process_metrics import process_metrics
from .record import RunRecord
from .summary import rows_as_dicts, run_header, submission_rows
from .templating import duration, environment
from .trust import LEADERBOARD_COLUMNS, group_improvement, leaderboard_values
from .verify import verify_run

GROUP_KEYS = ("agent", "driver", "task", "mode", "level", "seed", "isolation", *CONFIG_KEYS)
DEFAULT_BY = ("agent", "driver", "task", "mode")
COLUMNS = ("baseline", "best", "improvement", *LEADERBOARD_COLUMNS, "submissions", "valid",
           "time_to_best_s", "tokens", "cost_usd", "cost_per_point")
MONEY = ("cost_usd", "cost_per_point")


@dataclass
class RunRow:
    path: str
    verified: bool
    problem: str | None
    values: dict[str, Any]


def find_runs(runs_dir: Path) -> list[Path]:
    if not runs_dir.is_dir():
        raise A2CError(f"{runs_dir}: no such directory")
    found = []
    for dirpath, dirnames, filenames in os.walk(runs_dir):
        if RUN_JSON in filenames and (EVENTS_FILE in filenames or dirpath != str(runs_dir)):
            found.append(Path(dirpath))
            dirnames[:] = []  # never descend into a run (workspaces can be huge)
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return sorted(found)


def summarise(run_dir: Path) -> RunRow:
    record = RunRecord.load(run_dir)
    verification = verify_run(run_dir, record)
    header = run_header(record)
    baseline = record.baseline_score
    subs = submission_rows(record, baseline)
    metrics = process_metrics(record, rows_as_dicts(subs), baseline, header)
    best = max((s.score for s in subs if s.counts), default=None)
    if best is None:  # no valid model of its own: the run ends where it started
        best = baseline
    values = {key: header.get(key) for key in GROUP_KEYS}
    values.update(config_values(header, record.run))   # budget, model, agent_params (grouping.py)
    values.update({
        "run_id": header["run_id"], "baseline": baseline, "best": best,
        "improvement": None if best is None or baseline is None else best - baseline,
        "submissions": metrics["n_submissions"], "valid": metrics["n_valid"],
        # a best that never beat the baseline was reached by no one: no time to it
        "time_to_best_s": metrics["time_to_best_s"] if _beat(best, baseline) else None,
        **driver_usage(record, best, baseline),
        **leaderboard_values(record, subs),   # final, selection_gap, not_derived (trust.py)
        "contaminated": contamination_section(record)["flagged"],   # kept, marked
    })
    return RunRow(str(run_dir), verification.ok,
                  None if verification.ok else str(verification.first), values)


def _beat(best: float | None, baseline: float | None) -> bool:
    return best is not None and (baseline is None or best > baseline)


TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


def driver_usage(record: RunRecord, best: float | None, baseline: float | None
                 ) -> dict[str, Any]:
    """tokens, cost_usd and cost_per_point of one run (None without driver calls; the cost per
    point is None unless the run improved on its baseline)."""
    calls = [e.get("data") or {} for e in record.events_of("driver_call")]
    if not calls:
        return {"tokens": None, "cost_usd": None, "cost_per_point": None}
    tokens = int(sum(_number(c.get(k)) for c in calls for k in TOKEN_KINDS))
    cost = sum(_number(c.get("cost_usd")) for c in calls)
    gain = None if best is None or baseline is None else best - baseline
    return {"tokens": tokens, "cost_usd": cost,
            "cost_per_point": cost / gain if gain is not None and gain > 0 else None}


def _stats(values: list[Any]) -> dict[str, Any]:
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    return {"mean": statistics.fmean(nums),
            "std": statistics.stdev(nums) if len(nums) > 1 else None,
            "min": min(nums), "max": max(nums), "n": len(nums)}


def seeds_of(members: list[RunRow]) -> list:
    """The seeds a group's mean and spread are over (a sweep's groups differ only by seed)."""
    return sorted({m.values.get("seed") for m in members if m.values.get("seed") is not None})


def build_leaderboard(runs_dir: str | Path, by: tuple[str, ...] = DEFAULT_BY,
                      include_unverified: bool = False,
                      failed: dict[str, str] | None = None) -> dict[str, Any]:
    """`failed`: run directories a sweep recorded as failed trials, with the reason; they are
    listed as excluded, never counted (a crashed agent is not a score of its baseline). Runs in
    progress are listed as `running`, neither counted nor excluded. Groups are split by `by` and
    by every other setting that changes a run (grouping.CONFIG_KEYS), never by seed unless asked."""
    runs_dir = Path(runs_dir)
    failed = {str(Path(k).resolve()): v for k, v in (failed or {}).items()}
    for key in by:
        if key not in GROUP_KEYS:
            raise A2CError(f"--by: unknown key {key!r}; choose from {', '.join(GROUP_KEYS)}")
    added = ("agent",) if "agent" not in by else ()     # a row is one agent's, never a pool
    by = (*added, *by)
    rows, broken, running = [], [], []
    for run_dir in find_runs(runs_dir):
        if str(run_dir.resolve()) in failed:
            broken.append({"path": str(run_dir), "reason": f"failed trial: "
                           f"{failed[str(run_dir.resolve())]}"})
            continue
        state, detail = run_state(run_dir)
        if state == "live":
            running.append({"path": str(run_dir), "status": detail})
            continue
        try:
            rows.append(summarise(run_dir))
        except A2CError as exc:
            broken.append({"path": str(run_dir), "reason": detail or str(exc)})
            continue
        if detail and not rows[-1].verified:
            rows[-1].problem = detail
    counted = [r for r in rows if r.verified or include_unverified]
    excluded = [{"path": r.path, "reason": r.problem} for r in rows if not r.verified
                and not include_unverified] + broken
    hidden = tuple(k for k in CONFIG_KEYS if k not in by)
    groups: dict[tuple, list[RunRow]] = {}
    for row in counted:
        groups.setdefault(tuple("—" if row.values.get(k) is None else str(row.values.get(k))
                                for k in (*by, *hidden)), []).append(row)
    table = [_group(key, members, by, hidden) for key, members in groups.items()]
    # Runs of different wall-clock budgets are not comparable: the rows are ordered by budget
    # first (each budget's rows ranked by improvement) and the page says so.
    table.sort(key=lambda e: (wall_clock(e) is None, wall_clock(e) or 0.0,
                              -(e["improvement"]["mean"] if e["improvement"]["mean"]
                                is not None else float("-inf")), list(e["key"].values()),
                              list(map(str, e["config"].values()))))
    label_budgets(table, by)
    walls = label_table_budgets(table)
    board = {"by": list(by), "added_keys": list(added), "groups": table, "excluded": excluded,
             "running": running, "varying": varying_config(table),
             "include_unverified": include_unverified, "runs_dir": str(runs_dir),
             "n_runs": len(counted), "budgets": [duration(w) for w in walls],
             "mixed_budgets": len(walls) > 1}
    board["columns"] = compact_columns(board)
    board["cells"] = compact_cells(board)
    return board


def _group(key: tuple, members: list[RunRow], by: tuple[str, ...], hidden: tuple[str, ...]
           ) -> dict[str, Any]:
    values = [m.values for m in members]
    per_seed, repeated = seed_means(values)
    entry = {"key": dict(zip(by, key)), "config": dict(zip(hidden, key[len(by):])),
             "runs": len(members), "unverified": sum(1 for m in members if not m.verified),
             "run_ids": [m.values["run_id"] for m in members], "seeds": seeds_of(members),
             "repeats": repeats_note(repeated, len(seeds_of(members))),
             "contaminated": [m.values["run_id"] for m in members if m.values.get("contaminated")]}
    for column in COLUMNS:
        entry[column] = _stats([v[column] for v in values])
    if "seed" in by or not repeated:
        entry["improvement_interval"] = group_improvement(values)
    elif len(per_seed) >= 2:      # the seed is the unit: one mean per seed, repeats averaged
        entry["improvement_interval"] = group_improvement([{"improvement": v} for v in per_seed])
    else:                         # repeats of one seed: no interval across seeds
        entry["improvement_interval"] = None
    return entry


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


def _fmt_parts(stat: dict[str, Any], column: str = "") -> tuple[str, str | None]:
    """(the mean, its spread 'std (min–max)' or None for one value)."""
    if stat["mean"] is None:
        return "—", None
    one = _formatter(column)
    if stat["n"] <= 1 or stat["std"] is None:
        return one(stat["mean"]), None
    return one(stat["mean"]), f"{one(stat['std'])} ({one(stat['min'])}–{one(stat['max'])})"


def _fmt(stat: dict[str, Any], column: str = "") -> str:
    mean, spread = _fmt_parts(stat, column)
    return mean if spread is None else f"{mean} ± {spread}"


def display_columns(board: dict[str, Any]) -> list[str]:
    """The table's columns: the grouping keys, the other settings that vary between its rows
    (a budget, a base model), runs, the values, the improvement's interval after it."""
    columns = [*board["by"], *(["budget"] if "budget" not in board["by"] else []),
               *(k for k in board.get("varying", []) if k != "budget"), "runs", *COLUMNS]
    columns.insert(columns.index("improvement") + 1, "improvement_ci")
    return columns


def rows_for_display(board: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for g in board["groups"]:
        row = {k: v for k, v in g["key"].items()}
        row.update({k: "—" if v is None else str(v) for k, v in (g.get("labels") or {}).items()})
        notes = [f"{g['unverified']} unverified"] if g["unverified"] else []
        notes += [g["repeats"]] if g.get("repeats") else []
        notes += [f"{len(g['contaminated'])} contaminated"] if g.get("contaminated") else []
        row["runs"] = str(g["runs"]) + (f" ({'; '.join(notes)})" if notes else "")
        for column in COLUMNS:
            row[column] = _fmt(g[column], column)
        row.update(interval_cells(g))
        out.append(row)
    return out


def interval_cells(group: dict[str, Any]) -> dict[str, str]:
    """The improvement's marker (`*`: its interval excludes 0) and the interval's cell: across
    seeds the interval of the mean improvement, for one run the paired interval over items."""
    iv = group.get("improvement_interval") or {}
    cell = "—"
    if not iv and str(group.get("repeats") or "").startswith("repeats of seed"):
        cell = f"— ({group['repeats']}: no interval across seeds)"
    if iv.get("ci95"):
        cell = f"[{iv['ci95'][0]:+.2f}, {iv['ci95'][1]:+.2f}] ({iv['over']}, {iv['method']})"
    marker = iv.get("marker") or ""
    return {"improvement_ci": cell,
            "improvement": group_cell(group, "improvement") + (f" {marker}" if marker else "")}


def group_cell(group: dict[str, Any], column: str) -> str:
    return _fmt(group[column])


OPTIONAL = ("final", "selection_gap", "tokens", "cost_usd", "cost_per_point")


def compact_columns(board: dict[str, Any]) -> list[str]:
    """The page's columns: display_columns without the optional ones no group has a value in
    (no final split, no driver calls), so that the table fits a 1280-px page."""
    empty = {c for c in OPTIONAL if all(g[c]["mean"] is None for g in board["groups"])}
    return [c for c in display_columns(board) if c not in empty]


def compact_cells(board: dict[str, Any]) -> list[dict[str, dict[str, str | None]]]:
    """Each row's cells as {main, sub} for the HTML tables: the mean on the first line, the
    spread ('± std · min–max', left out when every run gave the same value) or the interval's
    method on a second, smaller one."""
    out = []
    for g, text in zip(board["groups"], rows_for_display(board)):
        row = {c: {"main": v, "sub": None} for c, v in text.items()}
        for column in COLUMNS:
            mean, _ = _fmt_parts(g[column], column)
            stat = g[column]
            sub = None
            if stat["n"] > 1 and stat["std"] and stat["min"] != stat["max"]:
                one = _formatter(column)
                sub = f"± {one(stat['std'])} · {one(stat['min'])}–{one(stat['max'])}"
            row[column] = {"main": mean, "sub": sub}
        marker = (g.get("improvement_interval") or {}).get("marker")
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


def render_leaderboard(board: dict[str, Any], fmt: str = "md") -> str:
    if fmt == "csv":
        return _csv(board)
    template = {"md": "leaderboard.md.j2", "html": "leaderboard.html.j2"}.get(fmt)
    if template is None:
        raise A2CError(f"--format: unknown format {fmt!r}; choose {', '.join(LEADERBOARD_FORMATS)}")
    return environment().get_template(template).render(
        board=board, rows=rows_for_display(board),
        columns=display_columns(board) if fmt == "md" else board["columns"],
        headings={**HEADINGS, **{k: k for k in board["by"]}})


CSV_INTERVAL = ("improvement_ci95_low", "improvement_ci95_high", "improvement_ci_over",
                "improvement_ci_method", "improvement_ci_n", "improvement_ci_excludes_0")


def _interval_csv(group: dict[str, Any]) -> list[str]:
    """The interval the table shows, as CSV cells (blank where it has none)."""
    iv = group.get("improvement_interval") or {}
    if not iv.get("ci95"):
        return [""] * len(CSV_INTERVAL)
    low, high = iv["ci95"]
    return [f"{low:.6g}", f"{high:.6g}", str(iv.get("over") or ""), str(iv.get("method") or ""),
            "" if iv.get("n") is None else str(iv["n"]),
            "" if iv.get("outside_noise") is None else str(bool(iv["outside_noise"])).lower()]


def _csv(board: dict[str, Any]) -> str:
    """One row per group: the --by keys (labels for a budget), the budget and its wall clock in
    seconds, the other settings that split rows, runs, then each statistic of each column, the
    improvement's 95% interval after the improvement's."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    stats = ("mean", "std", "min", "max")
    varying = [k for k in board.get("varying", []) if k != "budget"]
    values = [f"{c}_{s}" for c in COLUMNS for s in stats]
    at = values.index("improvement_max") + 1
    header = [*(k for k in board["by"] if k != "budget"), "budget", "budget_wall_clock_s",
              *varying, "runs", *values[:at], *CSV_INTERVAL, *values[at:]]
    writer.writerow(header)
    for g in board["groups"]:
        cells = ["" if g[c][s] is None else _csv_value(c, g[c][s]) for c in COLUMNS
                 for s in stats]
        writer.writerow([*("" if v == "—" else v for k, v in g["key"].items() if k != "budget"),
                         g["labels"].get("budget") or "",
                         "" if g.get("wall_clock_s") is None else f"{g['wall_clock_s']:g}",
                         *(g["labels"].get(k) or "" for k in varying), g["runs"],
                         *cells[:at], *_interval_csv(g), *cells[at:]])
    return buffer.getvalue()
