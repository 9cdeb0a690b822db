"""Leaderboards: one table across many runs, grouped (agent × driver × task × mode by default).

Only runs whose record verifies count (``--include-unverified`` overrides; excluded runs are
listed). Per group: number of runs (seeds), baseline, best, improvement (best - baseline),
submissions, valid submissions, time to best, driver tokens (input, output, cache read and
cache write, summed from the gateway's driver_call events, as its totals count them), driver cost (USD) and cost per point of improvement (cost /
(best - baseline); blank for a run that did not improve or called no driver), each as the mean
with its spread (sample standard deviation, min–max) when the group has several runs.
"""

from __future__ import annotations

import csv
import io
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.errors import A2CError

from .formats import LEADERBOARD_FORMATS
from .process_metrics import process_metrics
from .record import RunRecord
from .summary import run_header, submission_rows
from .templating import duration, environment
from .verify import verify_run

GROUP_KEYS = ("agent", "driver", "task", "mode", "level", "seed", "isolation")
DEFAULT_BY = ("agent", "driver", "task", "mode")
COLUMNS = ("baseline", "best", "improvement", "submissions", "valid", "time_to_best_s",
           "tokens", "cost_usd", "cost_per_point")
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
        if "run.json" in filenames and ("events.jsonl" in filenames or dirpath != str(runs_dir)):
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
    metrics = process_metrics(record, subs, baseline, header)
    best = max((s["score"] for s in subs if s["valid"] and s["score"] is not None
                and not s["base_copy"]), default=None)
    if best is None:  # no valid model of its own: the run ends where it started
        best = baseline
    values = {key: header.get(key) for key in GROUP_KEYS}
    values.update({
        "run_id": header["run_id"], "baseline": baseline, "best": best,
        "improvement": None if best is None or baseline is None else best - baseline,
        "submissions": metrics["n_submissions"], "valid": metrics["n_valid"],
        "time_to_best_s": metrics["time_to_best_s"],
        **driver_usage(record, best, baseline),
    })
    return RunRow(str(run_dir), verification.ok,
                  None if verification.ok else str(verification.first), values)


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
    listed as excluded, never counted (a crashed agent is not a score of its baseline)."""
    runs_dir = Path(runs_dir)
    failed = {str(Path(k).resolve()): v for k, v in (failed or {}).items()}
    for key in by:
        if key not in GROUP_KEYS:
            raise A2CError(f"--by: unknown key {key!r}; choose from {', '.join(GROUP_KEYS)}")
    rows, broken = [], []
    for run_dir in find_runs(runs_dir):
        if str(run_dir.resolve()) in failed:
            broken.append({"path": str(run_dir), "reason": f"failed trial: "
                           f"{failed[str(run_dir.resolve())]}"})
            continue
        try:
            rows.append(summarise(run_dir))
        except A2CError as exc:
            broken.append({"path": str(run_dir), "reason": str(exc)})
    counted = [r for r in rows if r.verified or include_unverified]
    excluded = [{"path": r.path, "reason": r.problem} for r in rows if not r.verified
                and not include_unverified] + broken
    groups: dict[tuple, list[RunRow]] = {}
    for row in counted:
        groups.setdefault(tuple("—" if row.values.get(k) is None else str(row.values.get(k))
                                for k in by), []).append(row)
    table = []
    for key, members in groups.items():
        entry = {"key": dict(zip(by, key)), "runs": len(members),
                 "unverified": sum(1 for m in members if not m.verified),
                 "run_ids": [m.values["run_id"] for m in members],
                 "seeds": seeds_of(members)}
        for column in COLUMNS:
            entry[column] = _stats([m.values[column] for m in members])
        table.append(entry)
    table.sort(key=lambda e: (-(e["improvement"]["mean"] if e["improvement"]["mean"]
                                is not None else float("-inf")), list(e["key"].values())))
    return {"by": list(by), "groups": table, "excluded": excluded,
            "include_unverified": include_unverified, "runs_dir": str(runs_dir),
            "n_runs": len(counted)}


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _money(value: float) -> str:
    return f"${value:.4f}" if abs(value) < 1 else f"${value:.2f}"


def _fmt(stat: dict[str, Any], seconds: bool = False, count: bool = False,
         money: bool = False) -> str:
    if stat["mean"] is None:
        return "—"
    one = duration if seconds else _count if count else _money if money else \
        (lambda v: f"{v:.2f}")
    if stat["n"] <= 1 or stat["std"] is None:
        return one(stat["mean"])
    return f"{one(stat['mean'])} ± {one(stat['std'])} ({one(stat['min'])}–{one(stat['max'])})"


def rows_for_display(board: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for g in board["groups"]:
        row = {k: v for k, v in g["key"].items()}
        row["runs"] = str(g["runs"]) + (f" ({g['unverified']} unverified)" if g["unverified"]
                                        else "")
        for column in COLUMNS:
            row[column] = _fmt(g[column], seconds=column.endswith("_s"),
                               count=column in ("submissions", "valid", "tokens"),
                               money=column in MONEY)
        out.append(row)
    return out


HEADINGS = {"baseline": "baseline", "best": "best", "improvement": "improvement",
            "submissions": "submissions", "valid": "valid", "time_to_best_s": "time to best",
            "runs": "runs", "tokens": "tokens", "cost_usd": "cost (USD)",
            "cost_per_point": "cost per point"}


def _csv_value(column: str, value: float) -> str:
    if column == "tokens":
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    if column in MONEY:
        return f"{value:.6g}"
    return f"{value:.4g}"


def render_leaderboard(board: dict[str, Any], fmt: str = "md") -> str:
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        stats = ("mean", "std", "min", "max")
        writer.writerow([*board["by"], "runs", *[f"{c}_{s}" for c in COLUMNS for s in stats]])
        for g in board["groups"]:
            writer.writerow([*("" if v == "—" else v for v in g["key"].values()), g["runs"],
                             *["" if g[c][s] is None else _csv_value(c, g[c][s]) for c in COLUMNS
                               for s in stats]])
        return buffer.getvalue()
    template = {"md": "leaderboard.md.j2", "html": "leaderboard.html.j2"}.get(fmt)
    if template is None:
        raise A2CError(f"--format: unknown format {fmt!r}; choose {', '.join(LEADERBOARD_FORMATS)}")
    columns = [*board["by"], "runs", *COLUMNS]
    return environment().get_template(template).render(
        board=board, rows=rows_for_display(board), columns=columns,
        headings={**HEADINGS, **{k: k for k in board["by"]}})
