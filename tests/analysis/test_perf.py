"""A long run (200 submissions, 200 snapshots) is reported in a few seconds."""

from __future__ import annotations

import time

import pytest

from a2c.analysis.report import write_report
from a2c.analysis.verify import verify_run


@pytest.mark.slow
def test_report_200_submissions_is_fast(maker, tmp_path):
    run = maker.make_run(tmp_path / "long", n=200)
    assert verify_run(run).ok
    start = time.perf_counter()
    report, _paths = write_report(run, tmp_path / "report")
    elapsed = time.perf_counter() - start
    assert report["metrics"]["n_submissions"] == 200
    assert report["metrics"]["n_snapshots"] == 201 and len(report["timeline"]) == 200
    assert elapsed < 10, f"report took {elapsed:.1f} s"


@pytest.mark.slow
def test_long_driver_record_is_fast(tmp_path):
    """200 driver calls, each request repeating the whole conversation (44 MB of bodies): the
    trajectory builds and verifies in a few seconds."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "trajectory"))
    import driver_record

    from a2c.analysis.trajectory import build_trajectory

    run = driver_record.write_long_record(tmp_path / "run", calls=200)
    start = time.perf_counter()
    trajectory = build_trajectory(run)
    elapsed = time.perf_counter() - start
    assert len([s for s in trajectory["steps"] if s["source"] == "agent"]) == 200
    assert trajectory["final_metrics"]["extra"]["tool_calls_by_kind"] == {"shell": 199}
    assert elapsed < 10, f"trajectory took {elapsed:.1f} s"
