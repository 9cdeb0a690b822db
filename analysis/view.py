"""`a2c view RUNS_DIR`: one page over every run of a folder — status, scores, a link to each run's
report, the leaderboard — for watching a sweep in a browser (as Inspect's and Harbor's viewers
allow) or archiving one as a single file.

The page is rebuilt from the files on every request (`--serve`) or once (`index.html`); while
anything is still queued or running it asks the browser to reload itself. It reads `sweep.json`
(written by `a2c sweep`, a2c/sweep/record.py) as plain JSON, and the run directories themselves,
so it works for a folder of plain `a2c run` records too.

Served (analysis/view_server.py), the page links each report as `/runs/<id>/report`:
`served_runs` is the allow-list of those ids (run directories found under the folder, by their
path below it) and `read_report_page` opens a report one path component at a time, refusing any
symlink, so no request ever names a file.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from a2c.contracts.run_info import RunInfo, RunStatus, read_run_mapping
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.sweep_file import SWEEP_FILE, SweepFile

from .board import Leaderboard
from .leaderboard import COLUMNS, HEADINGS, build_leaderboard, find_runs, rows_for_display
from .record import run_info_of
from .templating import environment

PAGE = "index.html"
REFRESH_S = 5
# run statuses still moving ("queued": a sweep trial whose run has not started)
LIVE = ("queued", RunStatus.RUNNING, RunStatus.PREPARED)
REPORT_PAGE = ("report", "report.html")     # below a run directory
MAX_PAGE_BYTES = 256 << 20

# (run directory, its id below the folder) -> the href of its report, or None for no link
Linker = Callable[[Path, str], "str | None"]


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_run(run_dir: Path) -> RunInfo | None:
    """A run's run.json (None when it is missing or unreadable)."""
    try:
        return run_info_of(read_run_mapping(RunPaths(run_dir).run_json))
    except (OSError, ValueError):
        return None


def _live(info: RunInfo | None) -> bool:
    return info is not None and info.status in LIVE


@dataclass
class ViewRow:
    """One row of the page: a sweep's trial (its plan and status) or a run found in the folder,
    with what its run.json says (None where it has none)."""

    id: str
    task: str | None
    agent: str | None
    driver: str | None
    mode: str | None
    seed: Any
    status: Any                  # the trial's status (a run's own when it is no trial)
    run_status: Any
    reason: str | None
    baseline: float | None
    best: float | None
    submissions: int | None
    run_id: str | None
    report: str | None
    contaminated: bool = False


def _report_link(runs_dir: Path, run_dir: Path) -> str | None:
    page = Path(run_dir).joinpath(*REPORT_PAGE)
    return os.path.relpath(page, runs_dir) if has_report_page(run_dir) else None


def has_report_page(run_dir: Path) -> bool:
    """The run has a report page, reached without a symlink."""
    page = Path(run_dir).joinpath(*REPORT_PAGE)
    return not any(p.is_symlink() for p in (Path(run_dir), page.parent, page)) and page.is_file()


def run_id_of(runs_dir: Path, run_dir: Path) -> str | None:
    """A run's id on the served page: its directory's path below the folder (None outside)."""
    try:
        return PurePosixPath(*Path(run_dir).resolve().relative_to(
            Path(runs_dir).resolve()).parts).as_posix()
    except ValueError:
        return None


def served_runs(runs_dir: Path) -> dict[str, Path]:
    """{id: run directory} of the ended runs the server may show a report of: the run
    directories found below the folder (never through a symlinked folder), live ones left out."""
    runs_dir = Path(runs_dir)
    found: dict[str, Path] = {}
    for run_dir in find_runs(runs_dir) if runs_dir.is_dir() else []:
        if any(p.is_symlink() for p in (run_dir, RunPaths(run_dir).run_json)):
            continue
        info = _read_run(run_dir)
        if _live(info):
            continue
        rid = run_id_of(runs_dir, run_dir)
        if rid and rid != ".":
            found[rid] = run_dir
    return found


def read_report_page(runs_dir: Path, run_id: str) -> bytes | None:
    """The report page of run `run_id` (an id of `served_runs`), opened component by component
    below `runs_dir` with O_NOFOLLOW: a symlinked run directory, report folder or page is refused
    (None), as is anything but a regular file."""
    parts = [*PurePosixPath(run_id).parts, *REPORT_PAGE]
    if not run_id or any(p in ("", ".", "..", "/") or "\0" in p for p in parts):
        return None
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(Path(runs_dir), os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags_dir, dir_fd=fd)
            os.close(fd)
            fd = nxt
        page = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                       | getattr(os, "O_CLOEXEC", 0), dir_fd=fd)
    except OSError:
        os.close(fd)
        return None
    os.close(fd)
    try:
        st = os.fstat(page)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_PAGE_BYTES:
            return None
        with os.fdopen(page, "rb", closefd=False) as handle:
            return handle.read(MAX_PAGE_BYTES + 1)[:MAX_PAGE_BYTES]
    finally:
        os.close(page)


@dataclass
class ViewData:
    """What the page shows (view.html.j2 renders its fields)."""

    runs_dir: str
    sweep: SweepFile | None
    rows: list[ViewRow]
    counts: dict[str, int]
    board: Leaderboard | None
    live: bool


def collect(runs_dir: Path, link: Linker | None = None) -> ViewData:
    """What the page shows: the sweep (if any), one row per trial or run, the leaderboard.
    `link` gives a run's report link (default: the relative path of its report.html)."""
    runs_dir = Path(runs_dir)

    def report(run_dir: Path) -> str | None:
        if link is None:
            return _report_link(runs_dir, run_dir)
        rid = run_id_of(runs_dir, run_dir)
        return link(run_dir, rid) if rid else None

    raw = _read_json(runs_dir / SWEEP_FILE)
    sweep = SweepFile.from_dict(raw) if raw is not None else None
    trials = sweep.trials if sweep else ()
    rows: list[ViewRow] = []
    seen: set[str] = set()
    for t in trials:
        run_dir = Path(t.run_dir)
        info = _read_run(run_dir)
        seen.add(str(run_dir.resolve()))
        rows.append(ViewRow(
            id=t.id, task=t.task, agent=t.agent, driver=t.driver, mode=t.mode, seed=t.seed,
            status=t.status, run_status=info.status if info else None, reason=t.reason,
            baseline=info.baseline_score if info else None,
            best=info.best_score if info else None,
            submissions=info.submissions if info else None,
            run_id=info.run_id if info else None, report=report(run_dir)))
    failed = {t.run_dir: t.reason or "failed" for t in trials if t.status == "failed"}
    found = find_runs(runs_dir) if runs_dir.is_dir() else []
    for run_dir in found:
        if str(run_dir.resolve()) in seen:
            continue
        info = _read_run(run_dir)
        rows.append(_run_row(run_dir, info, report(run_dir)))
    board = build_leaderboard(runs_dir, failed=failed) if found else None
    flagged = {rid for g in (board.groups if board else []) for rid in g.contaminated}
    for row in rows:   # the contamination check's verdict (analysis/contamination.py), per run
        row.contaminated = row.run_id in flagged
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row.status)] = counts.get(str(row.status), 0) + 1
    live = any(r.status in LIVE for r in rows) or bool(sweep and not sweep.ended_at)
    return ViewData(runs_dir=str(runs_dir), sweep=sweep, rows=rows, counts=counts,
                    board=board, live=live)


def _run_row(run_dir: Path, info: RunInfo | None, report: str | None) -> ViewRow:
    """The row of a run that is no sweep's trial."""
    if info is None:
        return ViewRow(id=run_dir.name, task=None, agent=None, driver=None, mode=None,
                       seed=None, status=None, run_status=None, reason=None, baseline=None,
                       best=None, submissions=None, run_id=None, report=report)
    return ViewRow(id=info.run_id or run_dir.name, task=info.task, agent=info.agent,
                   driver=info.driver, mode=info.mode, seed=info.seed, status=info.status,
                   run_status=info.status, reason=None, baseline=info.baseline_score,
                   best=info.best_score, submissions=info.submissions, run_id=info.run_id,
                   report=report)


def render_view(runs_dir: Path, refresh_s: int | None = REFRESH_S, link: Linker | None = None,
                leaderboard_href: str | None = None) -> str:
    """The page; served, `link` makes each report's link and `leaderboard_href` links the
    leaderboard page."""
    data = collect(runs_dir, link)
    board = data.board
    columns = [*(board.by if board else []), "runs", *COLUMNS]
    return environment().get_template("view.html.j2").render(
        runs_dir=data.runs_dir, sweep=data.sweep, rows=data.rows, counts=data.counts,
        board=board, live=data.live, refresh_s=refresh_s if data.live else None,
        leaderboard_href=leaderboard_href,
        lb_rows=rows_for_display(board) if board else [], lb_columns=columns,
        headings={**HEADINGS, **{k: k for k in (board.by if board else [])}})


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
        if _live(_read_run(run_dir)):
            continue
        page = run_dir / "report" / "report.html"
        if any(p.is_symlink() for p in (run_dir, page.parent, page)):
            continue                  # never written (nor served) through a symlink
        if page.is_file() and page.stat().st_mtime >= RunPaths(run_dir).run_json.stat().st_mtime:
            continue
        try:
            write_report(run_dir, run_dir / "report", force=True)
        except A2CError:
            continue
        written.append(page)
    return written
