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
