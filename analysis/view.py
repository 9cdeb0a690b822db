"""`a2c view RUNS_DIR`: one page over every run of a folder — status, scores, a link to each run's
report, the leaderboard — for watching a sweep in a browser (as Inspect's and Harbor's viewers
allow) or archiving one as a single file.

The page is rebuilt from the files on every request (`--serve`) or once (`index.html`); while
anything is still queued or running it asks the browser to reload itself. It reads `sweep.json`
(written by `a2c sweep`, a2c/sweep/record.py) as plain JSON, and the run directories themselves,
so it works for a folder of plain `a2c run` records too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths

from .leaderboard import COLUMNS, HEADINGS, build_leaderboard, find_runs, rows_for_display
from .templating import environment

SWEEP_FILE = "sweep.json"      # a2c/sweep/record.py SWEEP_FILE
PAGE = "index.html"
REFRESH_S = 5
LIVE = ("queued", "running", "prepared")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _report_link(runs_dir: Path, run_dir: Path) -> str | None:
    page = run_dir / "report" / "report.html"
    return os.path.relpath(page, runs_dir) if page.is_file() else None


def collect(runs_dir: Path) -> dict[str, Any]:
    """What the page shows: the sweep (if any), one row per trial or run, the leaderboard."""
    runs_dir = Path(runs_dir)
    sweep = _read_json(runs_dir / SWEEP_FILE)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for t in (sweep or {}).get("trials") or []:
        run_dir = Path(t["run_dir"])
        info = _read_json(RunPaths(run_dir).run_json) or {}
        seen.add(str(run_dir.resolve()))
        rows.append({"id": t["id"], "task": t["task"], "agent": t["agent"],
                     "driver": t.get("driver"), "mode": t["mode"], "seed": t["seed"],
                     "status": t["status"], "run_status": info.get("status"),
                     "reason": t.get("reason"),
                     "baseline": info.get("baseline_score"), "best": info.get("best_score"),
                     "submissions": info.get("submissions"),
                     "report": _report_link(runs_dir, run_dir)})
    failed = {t["run_dir"]: t.get("reason") or "failed"
              for t in (sweep or {}).get("trials") or [] if t["status"] == "failed"}
    found = find_runs(runs_dir) if runs_dir.is_dir() else []
    for run_dir in found:
        if str(run_dir.resolve()) in seen:
            continue
        info = _read_json(RunPaths(run_dir).run_json) or {}
        rows.append({"id": info.get("run_id", run_dir.name), "task": info.get("task"),
                     "agent": info.get("agent"), "driver": info.get("driver"),
                     "mode": info.get("mode"), "seed": info.get("seed"),
                     "status": info.get("status"), "run_status": info.get("status"),
                     "reason": None, "baseline": info.get("baseline_score"),
                     "best": info.get("best_score"), "submissions": info.get("submissions"),
                     "report": _report_link(runs_dir, run_dir)})
    board = build_leaderboard(runs_dir, failed=failed) if found else None
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row["status"])] = counts.get(str(row["status"]), 0) + 1
    live = any(r["status"] in LIVE for r in rows) or bool(sweep and not sweep.get("ended_at"))
    return {"runs_dir": str(runs_dir), "sweep": sweep, "rows": rows, "counts": counts,
            "board": board, "live": live}


def render_view(runs_dir: Path, refresh_s: int | None = REFRESH_S) -> str:
    data = collect(runs_dir)
    board = data["board"]
    columns = [*(board["by"] if board else []), "runs", *COLUMNS]
    return environment().get_template("view.html.j2").render(
        **data, refresh_s=refresh_s if data["live"] else None,
        lb_rows=rows_for_display(board) if board else [], lb_columns=columns,
        headings={**HEADINGS, **{k: k for k in (board["by"] if board else [])}})


def write_view(runs_dir: Path, out: Path | None = None) -> Path:
    from a2c.fsutil import write_text_atomic
    path = Path(out) if out else Path(runs_dir) / PAGE
    write_text_atomic(path, render_view(Path(runs_dir)))
    return path


def write_missing_reports(runs_dir: Path) -> list[Path]:
    """report/ for every ended run that has none yet (or an older one): the page's links."""
    from a2c.errors import A2CError

    from .report import write_report
    written = []
    for run_dir in find_runs(Path(runs_dir)):
        info = _read_json(RunPaths(run_dir).run_json) or {}
        if info.get("status") in LIVE:
            continue
        page = run_dir / "report" / "report.html"
        if page.is_file() and page.stat().st_mtime >= RunPaths(run_dir).run_json.stat().st_mtime:
            continue
        try:
            write_report(run_dir, run_dir / "report", force=True)
        except A2CError:
            continue
        written.append(page)
    return written
