"""`a2c leaderboard`: grouping, spread across seeds, formats, unverified runs."""

from __future__ import annotations

import csv
import io
import json

import pytest

from a2c.analysis.board import Running
from a2c.analysis.leaderboard import build_leaderboard, render_leaderboard
from a2c.cli import main


@pytest.fixture(scope="module")
def runs_dir(maker, tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    maker.make_run(root / "a-s0", seed=0, agent="ref-sft")
    maker.make_run(root / "a-s1", seed=1, agent="ref-sft")
    maker.make_run(root / "a-s2", seed=2, agent="ref-sft")
    maker.make_run(root / "b-s0", n=3, seed=0, agent="ref-grpo")
    bad = maker.make_run(root / "c-s0", seed=0, agent="ref-copy")
    lines = (bad / "events.jsonl").read_bytes().splitlines(keepends=True)
    event = json.loads(lines[2])
    event["data"]["score"] = 0.0
    lines[2] = json.dumps(event, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    (bad / "events.jsonl").write_bytes(b"".join(lines))
    return root


def test_groups_and_spread(runs_dir):
    board = build_leaderboard(runs_dir)
    assert board.n_runs == 4
    groups = {g.key["agent"]: g for g in board.groups}
    assert set(groups) == {"ref-sft", "ref-grpo"}
    sft = groups["ref-sft"]
    assert sft.runs == 3 and sft.key == {"agent": "ref-sft", "driver": "scripted",
                                               "task": "arith", "mode": "free"}
    # seeds 0, 1, 2 shift every score by 0.7 per seed and the baseline by 0.3.
    assert sft.stats["best"].mean == pytest.approx(52.7)
    assert sft.stats["best"].min == 52.0 and sft.stats["best"].max == pytest.approx(53.4)
    assert sft.stats["best"].std == pytest.approx(0.7)
    assert sft.stats["improvement"].mean == pytest.approx(22.4)
    assert sft.stats["time_to_best_s"].mean == 2700.0
    grpo = groups["ref-grpo"]
    assert grpo.runs == 1 and grpo.stats["best"].std is None and grpo.stats["best"].mean == 47.5
    assert board.groups[0].key["agent"] == "ref-sft"  # sorted by improvement
    assert [e.path.endswith("c-s0") for e in board.excluded] == [True]
    assert "events.jsonl:3" in board.excluded[0].reason


def test_include_unverified(runs_dir):
    board = build_leaderboard(runs_dir, include_unverified=True)
    assert board.n_runs == 5 and board.excluded == []
    copy = next(g for g in board.groups if g.key["agent"] == "ref-copy")
    assert copy.unverified == 1


def test_by_task_keeps_the_agent_column(runs_dir):
    """Issue 31: `--by task` pooled every agent of a task into one row and dropped the agent
    column; a row is always one agent's, so the agent is added to the keys and shown."""
    board = build_leaderboard(runs_dir, by=("task",))
    assert board.by == ["agent", "task"] and board.added_keys == ["agent"]
    assert sorted((g.key["agent"], g.runs) for g in board.groups) == [
        ("ref-grpo", 1), ("ref-sft", 3)]
    md = render_leaderboard(board, "md")
    assert "| agent | task | budget | runs |" in md and "agent added" in md
    rows = list(csv.DictReader(io.StringIO(render_leaderboard(board, "csv"))))
    assert sorted(r["agent"] for r in rows) == ["ref-grpo", "ref-sft"]


def test_formats(runs_dir, tmp_path, capsys):
    board = build_leaderboard(runs_dir)
    md = render_leaderboard(board, "md")
    assert "| agent | driver | task | mode | budget | runs |" in md
    assert "| 60.0 min | 3 |" in md and "Budgets differ" not in md
    assert "52.70 ± 0.70 (52.00–53.40)" in md
    assert "Excluded" in md and "c-s0" in md
    rows = list(csv.DictReader(io.StringIO(render_leaderboard(board, "csv"))))
    assert len(rows) == 2 and rows[0]["agent"] == "ref-sft" and rows[0]["runs"] == "3"
    assert float(rows[0]["best_mean"]) == pytest.approx(52.7)
    html = render_leaderboard(board, "html")
    assert '<table id="leaderboard">' in html and "ref-grpo" in html
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(runs_dir), "--format", "csv", "--out", str(out)]) == 0
    assert out.read_text().startswith("agent,driver,task,mode,budget,budget_wall_clock_s,runs,")
    assert "excluded" in capsys.readouterr().err
    assert main(["leaderboard", str(runs_dir), "--by", "agent,seed"]) == 0
    assert "| agent | seed | budget | runs |" in capsys.readouterr().out
    assert main(["leaderboard", str(runs_dir), "--by", "colour"]) == 1


# ------------------------------------------------------------------ issue 25: unlike runs apart
def _budget_run(maker, monkeypatch, dest, wall, **kw):
    monkeypatch.setattr(maker, "WALL", wall)
    return maker.make_run(dest, **kw)


def test_runs_with_other_budgets_are_never_pooled(maker, monkeypatch, tmp_path):
    """The issue's case: two runs of one agent, 10- and 20-minute budgets, the same seed."""
    _budget_run(maker, monkeypatch, tmp_path / "cc-10m", 600, seed=0)
    _budget_run(maker, monkeypatch, tmp_path / "cc-20m", 1200, seed=0, n=4)
    board = build_leaderboard(tmp_path)
    assert [g.runs for g in board.groups] == [1, 1]
    assert board.varying == ["budget"]
    assert sorted(g.labels["budget"] for g in board.groups) == ["10.0 min", "20.0 min"]
    assert all(g.improvement_interval.over == "items" for g in board.groups)
    md = render_leaderboard(board, "md")
    assert "| agent | driver | task | mode | budget | runs |" in md
    assert "| 10.0 min | 1 |" in md and "| 20.0 min | 1 |" in md
    assert "(seeds, t)" not in md and "split by budget" in md
    rows = list(csv.DictReader(io.StringIO(render_leaderboard(board, "csv"))))
    assert sorted(r["budget"] for r in rows) == ["10.0 min", "20.0 min"]


def test_budgets_that_differ_with_the_task_are_shown_and_flagged(maker, monkeypatch, tmp_path):
    """Issue 31: a 10-minute and a 4-minute run (two tasks) sat side by side with no budget in
    sight. The budget is always a column (its wall clock in the CSV), and a table of several
    budgets says they are not comparable and orders its rows by budget, then improvement."""
    _budget_run(maker, monkeypatch, tmp_path / "a", 600, seed=0, task_id="arith", n=4)
    _budget_run(maker, monkeypatch, tmp_path / "b", 240, seed=0, task_id="other")
    board = build_leaderboard(tmp_path)
    assert len(board.groups) == 2 and board.varying == []
    assert board.mixed_budgets and board.budgets == ["4.0 min", "10.0 min"]
    # the 4-minute run improved more, but budget comes first: 4 min, then 10 min
    assert [g.labels["budget"] for g in board.groups] == ["4.0 min", "10.0 min"]
    assert [g.key["task"] for g in board.groups] == ["other", "arith"]
    md = render_leaderboard(board, "md")
    assert "| agent | driver | task | mode | budget | runs |" in md
    assert "| other | free | 4.0 min | 1 |" in md and "| arith | free | 10.0 min | 1 |" in md
    assert "Budgets differ** (4.0 min, 10.0 min of wall clock)" in md
    assert "not comparable" in md
    rows = list(csv.DictReader(io.StringIO(render_leaderboard(board, "csv"))))
    assert [(r["task"], r["budget"], r["budget_wall_clock_s"]) for r in rows] == [
        ("other", "4.0 min", "240"), ("arith", "10.0 min", "600")]
    html = render_leaderboard(board, "html")
    assert "<th>budget</th>" in html and "Budgets differ" in html
    same = build_leaderboard(tmp_path, by=("agent", "task"))
    assert same.mixed_budgets                       # whatever the keys


def _raise_baseline(maker, run, score):
    """Re-record `run` with a baseline scored `score` (sealed and signed again, as the runtime
    would have written it)."""
    path = run / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        if event["type"] == "baseline_scored":
            event["data"]["score"] = score
        if event["type"] == "run_finished":
            event["data"]["baseline_score"] = score
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    for name, key in (("run.json", "baseline_score"), ("results/baseline.json", "score")):
        data = json.loads((run / name).read_text())
        data[key] = score
        (run / name).write_text(json.dumps(data, indent=1))
    maker.reseal(run)


def _md_rows(md):
    """The Markdown table's rows as {heading: cell}."""
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in lines]
    return [dict(zip(cells[0], row)) for row in cells[1:]]


def test_time_to_best_is_blank_when_the_best_never_beat_the_baseline(maker, tmp_path):
    """Issue 31: 'time to best' was a time for a run that never beat its baseline."""
    maker.make_run(tmp_path / "up", seed=0, agent="ref-sft")
    flat = maker.make_run(tmp_path / "flat", seed=0, agent="ref-copy")
    _raise_baseline(maker, flat, 60.0)                   # its best valid score is 52.0
    board = build_leaderboard(tmp_path)
    groups = {g.key["agent"]: g for g in board.groups}
    assert board.excluded == [] and groups["ref-copy"].stats["improvement"].mean == -8.0
    assert groups["ref-copy"].stats["time_to_best_s"].mean is None
    assert groups["ref-sft"].stats["time_to_best_s"].mean == 2700.0
    md = {r["agent"]: r for r in _md_rows(render_leaderboard(board, "md"))}
    assert md["ref-copy"]["time to best"] == "—" and md["ref-sft"]["time to best"] == "45.0 min"
    assert md["ref-copy"]["improvement"].startswith("-8.00")
    rows = {r["agent"]: r for r in csv.DictReader(io.StringIO(render_leaderboard(board, "csv")))}
    assert rows["ref-copy"]["time_to_best_s_mean"] == ""
    assert rows["ref-sft"]["time_to_best_s_mean"] == "2700"


def test_csv_has_the_interval_the_table_shows(runs_dir):
    """Issue 31: the CSV lacked the improvement's 95% interval; it has the same interval as
    the table (over seeds for several runs, paired over items for one)."""
    board = build_leaderboard(runs_dir)
    rows = {r["agent"]: r for r in csv.DictReader(io.StringIO(render_leaderboard(board, "csv")))}
    header = render_leaderboard(board, "csv").splitlines()[0].split(",")
    assert header.index("improvement_ci95_low") == header.index("improvement_max") + 1
    md = render_leaderboard(board, "md")
    for g in board.groups:
        iv, row = g.improvement_interval, rows[g.key["agent"]]
        low, high = float(row["improvement_ci95_low"]), float(row["improvement_ci95_high"])
        assert (low, high) == pytest.approx(tuple(iv.ci95), abs=1e-3)
        assert row["improvement_ci_over"] == iv.over
        assert row["improvement_ci_method"] == iv.method
        assert row["improvement_ci_n"] == str(iv.n)
        assert row["improvement_ci_excludes_0"] == str(iv.outside_noise).lower()
        assert f"[{low:+.2f}, {high:+.2f}] ({iv.over}, {iv.method})" in md
    assert rows["ref-sft"]["improvement_ci_over"] == "seeds"
    assert rows["ref-grpo"]["improvement_ci_over"] == "items"


def test_by_budget_is_accepted(maker, monkeypatch, tmp_path, capsys):
    _budget_run(maker, monkeypatch, tmp_path / "a", 600, seed=0)
    _budget_run(maker, monkeypatch, tmp_path / "b", 1200, seed=1)
    board = build_leaderboard(tmp_path, by=("budget",))
    assert len(board.groups) == 2 and board.varying == []
    assert main(["leaderboard", str(tmp_path), "--by", "agent,budget"]) == 0
    out = capsys.readouterr().out
    assert "| agent | budget | runs |" in out and "| 10.0 min |" in out


def test_repeats_of_one_seed_are_not_seeds(maker, tmp_path):
    maker.make_run(tmp_path / "r1", seed=0)
    maker.make_run(tmp_path / "r2", seed=0, n=4)
    board = build_leaderboard(tmp_path)
    (group,) = board.groups
    assert group.runs == 2 and group.repeats == "repeats of seed 0"
    assert group.improvement_interval is None         # no t-interval over repeats
    md = render_leaderboard(board, "md")
    assert "2 (repeats of seed 0)" in md and "(seeds, t)" not in md
    assert "no interval across seeds" in md


def test_repeated_seeds_are_averaged_before_the_interval(maker, tmp_path):
    maker.make_run(tmp_path / "s0a", seed=0)
    maker.make_run(tmp_path / "s0b", seed=0, n=4)
    maker.make_run(tmp_path / "s1", seed=1)
    maker.make_run(tmp_path / "s2", seed=2)
    (group,) = build_leaderboard(tmp_path).groups
    iv = group.improvement_interval
    assert iv.over == "seeds" and iv.n == 3          # three seeds, not four runs
    assert group.repeats == "3 seeds; seed 0 ×2 averaged per seed"


def _mark(run, status, deadline):
    info = json.loads((run / "run.json").read_text())
    info.update(status=status, deadline=deadline)
    (run / "run.json").write_text(json.dumps(info))


def test_a_run_in_progress_is_running_not_crashed(maker, tmp_path):
    import time
    maker.make_run(tmp_path / "done", seed=0)
    live = maker.make_run(tmp_path / "live", seed=1)
    _mark(live, "running", time.time() + 600)
    stale = maker.make_run(tmp_path / "stale", seed=2)
    _mark(stale, "running", time.time() - 7200)
    board = build_leaderboard(tmp_path)
    assert board.n_runs == 1
    assert board.running == [Running(str(live), "running")]
    (excluded,) = board.excluded
    assert excluded.path == str(stale) and "after its deadline" in excluded.reason
    assert "a2c run --resume" in excluded.reason
    md = render_leaderboard(board, "md")
    assert "Running (not counted yet)" in md and f"`{live}`: running" in md
    html = render_leaderboard(board, "html")
    running = html[html.index("Running (not counted yet)"):]
    assert str(live) in running.split("Excluded")[0]


def test_view_lists_a_running_run_apart_and_shows_the_interval_column(maker, tmp_path):
    import time

    from a2c.analysis.view import render_view
    for seed in (0, 1):
        maker.make_run(tmp_path / f"s{seed}", seed=seed)
    live = maker.make_run(tmp_path / "live", seed=2)
    _mark(live, "running", time.time() + 600)
    page = render_view(tmp_path)
    assert "<th>improvement 95% CI</th>" in page and '<span class="spread">seeds, t</span>' in page
    assert "Running (not counted yet)" in page
    not_counted = page.split("<h3>Not counted</h3>")[1] if "<h3>Not counted</h3>" in page else ""
    assert str(live) not in not_counted
    assert 'class="spread"' in page and 'class="lb-wrap"' in page


def test_view_leaderboard_fits_1280_px_with_its_interval_column(maker, monkeypatch, tmp_path):
    """Measured in headless Chromium at a 1280-px window: the widest realistic table (two
    budgets, driver tokens and costs, the interval column) ends inside the page."""
    import importlib.util
    import re
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "a2c_test_chromium_page", Path(__file__).with_name("chromium_page.py"))
    page_helpers = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = page_helpers
    spec.loader.exec_module(page_helpers)
    if page_helpers.chromium() is None:
        pytest.skip("chromium is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "trajectory"))
    import driver_record as dr

    from a2c.analysis.view import render_view
    root = tmp_path / "runs"
    for wall, name in ((600, "cc10"), (1200, "cc20")):
        monkeypatch.setattr(maker, "WALL", wall)
        for seed in (0, 1):
            dr.add_to_run(maker.make_run(root / f"{name}-s{seed}", seed=seed, agent="claude-code",
                                         driver="scripted:sft-recipe"), maker, "claude-code")
    monkeypatch.setattr(maker, "WALL", 3600)
    maker.make_run(root / "ref", seed=0, agent="ref-sft")
    html = render_view(root).replace("</body>", (
        "<script>const t = document.getElementById('leaderboard').getBoundingClientRect();"
        "console.log('WIDTH ' + t.right + ' ' + document.documentElement.clientWidth);"
        "</script></body>"))
    assert "<th>improvement 95% CI</th>" in html and "<th>budget</th>" in html
    page = tmp_path / "view.html"
    page.write_text(html)
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([page_helpers.chromium(), *page_helpers.FLAGS,
                               f"--user-data-dir={profile}", "--window-size=1280,900",
                               "--dump-dom", page.as_uri()],
                              capture_output=True, text=True, timeout=120)
    right, width = map(float, re.search(r"WIDTH ([\d.]+) ([\d.]+)", proc.stderr).groups())
    assert right <= width, (right, width)
