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

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.event_payloads import DriverCall
from a2c.contracts.events import EVENTS_FILE
from a2c.contracts.run_info import RUN_JSON
from a2c.errors import A2CError

from .board import Excluded, Group, Leaderboard, Running, Stat
from .contamination import contamination_section
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
from .interval_records import PairedInterval
from .leaderboard_render import (  # re-exported: the readers of the table name them here
    COLUMNS,
    HEADINGS,
    compact_cells,
    compact_columns,
    render_leaderboard,
    rows_for_display,
)
from .process_metrics import process_metrics
from .record import RunRecord
from .summary import run_header, submission_rows
from .templating import duration
from .trust import group_improvement, improvement_paired, leaderboard_values
from .verify import verify_run

GROUP_KEYS = ("agent", "driver", "task", "mode", "level", "seed", "isolation", *CONFIG_KEYS)
DEFAULT_BY = ("agent", "driver", "task", "mode")
__all__ = ["COLUMNS", "DEFAULT_BY", "GROUP_KEYS", "HEADINGS", "RunRow", "build_leaderboard",
           "driver_usage", "find_runs", "render_leaderboard", "rows_for_display", "summarise"]


@dataclass
class RunRow:
    """One run's values, keyed by GROUP_KEYS and COLUMNS (the columns a group's stats are of)."""

    path: str
    verified: bool
    problem: str | None
    values: dict[str, Any]
    run_id: str
    contaminated: bool
    paired: PairedInterval | None = None    # its best − baseline over items (a group of one)

    @property
    def seed(self) -> Any:
        return self.values.get("seed")


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
    metrics = process_metrics(record, subs, baseline, header)
    best = max((s.score for s in subs if s.counted), default=None)
    if best is None:  # no valid model of its own: the run ends where it started
        best = baseline
    fields = header.to_dict()
    values = {key: fields.get(key) for key in GROUP_KEYS}
    values.update(config_values(header, record.info))  # budget, model, agent_params (grouping.py)
    values.update({
        "run_id": header.run_id, "baseline": baseline, "best": best,
        "improvement": None if best is None or baseline is None else best - baseline,
        "submissions": metrics.n_submissions, "valid": metrics.n_valid,
        # a best that never beat the baseline was reached by no one: no time to it
        "time_to_best_s": metrics.time_to_best_s if _beat(best, baseline) else None,
        **driver_usage(record, best, baseline),
        **leaderboard_values(record, subs),   # final, selection_gap, not_derived (trust.py)
    })
    paired = improvement_paired(record, subs)
    return RunRow(str(run_dir), verification.ok,
                  None if verification.ok else str(verification.first), values,
                  run_id=header.run_id,
                  contaminated=contamination_section(record).flagged,  # kept, marked
                  paired=paired)


def _beat(best: float | None, baseline: float | None) -> bool:
    return best is not None and (baseline is None or best > baseline)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


def driver_usage(record: RunRecord, best: float | None, baseline: float | None
                 ) -> dict[str, Any]:
    """tokens, cost_usd and cost_per_point of one run (None without driver calls; the cost per
    point is None unless the run improved on its baseline)."""
    calls = [e.data for e in record.payloads(DriverCall)]
    if not calls:
        return {"tokens": None, "cost_usd": None, "cost_per_point": None}
    tokens = int(sum(_number(c.input_tokens) + _number(c.output_tokens)
                     + _number(c.cache_read_tokens) + _number(c.cache_write_tokens)
                     for c in calls))
    cost = sum(_number(c.cost_usd) for c in calls)
    gain = None if best is None or baseline is None else best - baseline
    return {"tokens": tokens, "cost_usd": cost,
            "cost_per_point": cost / gain if gain is not None and gain > 0 else None}


def _stats(values: list[Any]) -> Stat:
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums:
        return Stat()
    return Stat(mean=statistics.fmean(nums),
                std=statistics.stdev(nums) if len(nums) > 1 else None,
                min=min(nums), max=max(nums), n=len(nums))


def seeds_of(members: list[RunRow]) -> list:
    """The seeds a group's mean and spread are over (a sweep's groups differ only by seed)."""
    return sorted({m.seed for m in members if m.seed is not None})


def build_leaderboard(runs_dir: str | Path, by: tuple[str, ...] = DEFAULT_BY,
                      include_unverified: bool = False,
                      failed: dict[str, str] | None = None) -> Leaderboard:
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
    rows: list[RunRow] = []
    broken: list[Excluded] = []
    running: list[Running] = []
    for run_dir in find_runs(runs_dir):
        if str(run_dir.resolve()) in failed:
            broken.append(Excluded(str(run_dir), f"failed trial: "
                                                 f"{failed[str(run_dir.resolve())]}"))
            continue
        state, detail = run_state(run_dir)
        if state == "live":
            running.append(Running(str(run_dir), detail))
            continue
        try:
            rows.append(summarise(run_dir))
        except A2CError as exc:
            broken.append(Excluded(str(run_dir), detail or str(exc)))
            continue
        if detail and not rows[-1].verified:
            rows[-1].problem = detail
    counted = [r for r in rows if r.verified or include_unverified]
    excluded = [Excluded(r.path, r.problem) for r in rows if not r.verified
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
                              -(e.stats["improvement"].mean if e.stats["improvement"].mean
                                is not None else float("-inf")), list(e.key.values()),
                              list(map(str, e.config.values()))))
    label_budgets(table, by)
    walls = label_table_budgets(table)
    board = Leaderboard(by=list(by), added_keys=list(added), groups=table, excluded=excluded,
                        running=running, varying=varying_config(table),
                        include_unverified=include_unverified, runs_dir=str(runs_dir),
                        n_runs=len(counted), budgets=[duration(w) for w in walls],
                        mixed_budgets=len(walls) > 1)
    board.columns = compact_columns(board)
    board.cells = compact_cells(board)
    return board


def _group(key: tuple, members: list[RunRow], by: tuple[str, ...], hidden: tuple[str, ...]
           ) -> Group:
    values = [m.values for m in members]
    per_seed, repeated = seed_means(values)
    entry = Group(key=dict(zip(by, key)), config=dict(zip(hidden, key[len(by):])),
                  runs=len(members), unverified=sum(1 for m in members if not m.verified),
                  run_ids=[m.run_id for m in members], seeds=seeds_of(members),
                  repeats=repeats_note(repeated, len(seeds_of(members))),
                  contaminated=[m.run_id for m in members if m.contaminated],
                  stats={column: _stats([v[column] for v in values]) for column in COLUMNS})
    if "seed" in by or not repeated:
        entry.improvement_interval = group_improvement(
            [v["improvement"] for v in values], members[0].paired if len(members) == 1 else None)
    elif len(per_seed) >= 2:      # the seed is the unit: one mean per seed, repeats averaged
        entry.improvement_interval = group_improvement(per_seed)
    return entry
