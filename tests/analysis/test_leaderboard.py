"""`a2c leaderboard`: grouping, spread across seeds, formats, unverified runs."""

from __future__ import annotations

import csv
import io
import json

import pytest

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
    assert board["n_runs"] == 4
    groups = {g["key"]["agent"]: g for g in board["groups"]}
    assert set(groups) == {"ref-sft", "ref-grpo"}
    sft = groups["ref-sft"]
    assert sft["runs"] == 3 and sft["key"] == {"agent": "ref-sft", "driver": "scripted",
                                               "task": "arith", "mode": "free"}
    # seeds 0, 1, 2 shift every score by 0.7 per seed and the baseline by 0.3.
    assert sft["best"]["mean"] == pytest.approx(52.7)
    assert sft["best"]["min"] == 52.0 and sft["best"]["max"] == pytest.approx(53.4)
    assert sft["best"]["std"] == pytest.approx(0.7)
    assert sft["improvement"]["mean"] == pytest.approx(22.4)
    assert sft["time_to_best_s"]["mean"] == 2700.0
    grpo = groups["ref-grpo"]
    assert grpo["runs"] == 1 and grpo["best"]["std"] is None and grpo["best"]["mean"] == 47.5
    assert board["groups"][0]["key"]["agent"] == "ref-sft"  # sorted by improvement
    assert [e["path"].endswith("c-s0") for e in board["excluded"]] == [True]
    assert "events.jsonl:3" in board["excluded"][0]["reason"]


def test_include_unverified(runs_dir):
    board = build_leaderboard(runs_dir, include_unverified=True)
    assert board["n_runs"] == 5 and board["excluded"] == []
    copy = next(g for g in board["groups"] if g["key"]["agent"] == "ref-copy")
    assert copy["unverified"] == 1


def test_by_task_only(runs_dir):
    board = build_leaderboard(runs_dir, by=("task",))
    assert len(board["groups"]) == 1 and board["groups"][0]["runs"] == 4


def test_formats(runs_dir, tmp_path, capsys):
    board = build_leaderboard(runs_dir)
    md = render_leaderboard(board, "md")
    assert "| agent | driver | task | mode | runs |" in md
    assert "52.70 ± 0.70 (52.00–53.40)" in md
    assert "Excluded" in md and "c-s0" in md
    rows = list(csv.DictReader(io.StringIO(render_leaderboard(board, "csv"))))
    assert len(rows) == 2 and rows[0]["agent"] == "ref-sft" and rows[0]["runs"] == "3"
    assert float(rows[0]["best_mean"]) == pytest.approx(52.7)
    html = render_leaderboard(board, "html")
    assert '<table id="leaderboard">' in html and "ref-grpo" in html
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(runs_dir), "--format", "csv", "--out", str(out)]) == 0
    assert out.read_text().startswith("agent,driver,task,mode,runs,")
    assert "excluded" in capsys.readouterr().err
    assert main(["leaderboard", str(runs_dir), "--by", "agent,seed"]) == 0
    assert "| agent | seed | runs |" in capsys.readouterr().out
    assert main(["leaderboard", str(runs_dir), "--by", "colour"]) == 1
