"""Scores you can trust, in the analysis: the paired interval of an improvement (report), the
interval of the mean improvement across seeds with its marker (leaderboard)."""

from __future__ import annotations

import random

import pytest

from a2c.analysis.leaderboard import build_leaderboard, render_leaderboard
from a2c.analysis.report import build_report
from a2c.intervals import (
    difference_interval,
    improvement_interval,
    mean_interval,
    paired_interval,
)


def test_paired_interval_is_seeded_and_narrower_than_the_scores_intervals():
    rng = random.Random(0)
    hard = [rng.random() < 0.5 for _ in range(200)]          # the items' own difficulty
    base = [float(h) for h in hard]
    best = [1.0 if (h or rng.random() < 0.12) else 0.0 for h in hard]   # fixes ~6% of items
    out = paired_interval(best, base, seed=0)
    assert out == paired_interval(best, base, seed=0) and out["method"] == "BCa"
    assert out["difference"] == pytest.approx(100 * (sum(best) - sum(base)) / 200)
    lo, hi = out["ci95"]
    assert 0 < lo < out["difference"] < hi and out["outside_noise"] is True
    a_lo, a_hi = mean_interval(best, seed=0)
    b_lo, b_hi = mean_interval(base, seed=0)
    assert hi - lo < (a_hi - a_lo)                 # pairing removes the items' difficulty
    assert a_lo < b_hi                             # unpaired, the two intervals overlap
    same = paired_interval(base, base, seed=0)
    assert same["ci95"] == [0.0, 0.0] and same["outside_noise"] is False
    with pytest.raises(ValueError):
        paired_interval([1.0], [1.0, 0.0])


def test_improvement_interval_across_seeds():
    three = improvement_interval([22.0, 22.4, 22.8], seed=0)
    assert three["method"] == "t" and three["n"] == 3 and three["mean"] == pytest.approx(22.4)
    assert three["ci95"][0] < 22.4 < three["ci95"][1] and three["outside_noise"] is True
    noisy = improvement_interval([3.0, -2.0, 1.0], seed=0)
    assert noisy["outside_noise"] is False
    many = improvement_interval([float(v) for v in range(12)], seed=0)
    assert many["method"] == "BCa" and many == improvement_interval(list(range(12)), seed=0)
    assert improvement_interval([5.0])["ci95"] is None


def test_report_states_the_paired_interval(pristine_run):
    report = build_report(pristine_run)
    imp = report["improvement"]
    assert imp["submission"] == report["scores"]["best_submission"]
    paired = imp["paired_interval"]
    assert paired["n_items"] > 0 and paired["seed"] == 0
    import json
    best = next(s for s in report["submissions"] if s["id"] == imp["submission"])
    a = {i["id"]: i["score"] for i in json.loads((pristine_run / best["result_file"])
                                                 .read_text())["items"]}
    b = {i["id"]: i["score"] for i in json.loads((pristine_run / "results" / "baseline.json")
                                                 .read_text())["items"]}
    common = sorted(set(a) & set(b))
    assert paired["n_items"] == len(common)
    assert paired["difference"] == pytest.approx(
        100 * sum(a[i] - b[i] for i in common) / len(common), abs=1e-6)
    assert ("outside the noise" in imp["statement"]) == paired["outside_noise"]
    assert report["final_split"] is None and report["provenance"]["not_derived"] == []


def test_leaderboard_over_three_seeds_shows_the_interval_of_the_mean_improvement(
        maker, tmp_path):
    for seed in (0, 1, 2):
        maker.make_run(tmp_path / f"s{seed}", seed=seed, agent="ref-sft")
    maker.make_run(tmp_path / "one", seed=0, agent="ref-grpo")
    board = build_leaderboard(tmp_path)
    groups = {g.key["agent"]: g for g in board.groups}
    iv = groups["ref-sft"].improvement_interval
    assert iv.over == "seeds" and iv.n == 3 and iv.method == "t"
    assert iv.mean == pytest.approx(groups["ref-sft"].stats["improvement"].mean)
    assert iv.ci95[0] < iv.mean < iv.ci95[1]
    single = groups["ref-grpo"].improvement_interval
    assert single.over == "items"       # one run: its paired interval over items
    md = render_leaderboard(board, "md")
    assert "| improvement | improvement 95% CI | final split | selection gap | not derived |" in md
    assert f"[{iv.ci95[0]:+.2f}, {iv.ci95[1]:+.2f}] (seeds, t)" in md
    if iv.outside_noise:
        assert f"{groups['ref-sft'].stats['improvement'].mean:.2f} ± " in md and " *" in md


def test_difference_interval_of_two_independent_samples():
    rng = random.Random(1)
    a = [100.0 * (rng.random() < 0.7) for _ in range(100)]
    b = [100.0 * (rng.random() < 0.5) for _ in range(100)]
    out = difference_interval(a, b, seed=0)
    assert out == difference_interval(a, b, seed=0)
    assert out["difference"] == pytest.approx(sum(a) / 100 - sum(b) / 100)
    assert out["ci95"][0] < out["difference"] < out["ci95"][1]
    assert difference_interval(a, a, seed=0)["outside_noise"] is False
    assert difference_interval([1.0], b)["ci95"] is None
