"""Fixtures for the grader service tests: a run directory with a service.json, a service."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_helpers import RunFactory


@pytest.fixture
def make_run(tmp_path):
    return RunFactory(tmp_path)


@pytest.fixture
def service(make_run):
    """Start a service on a fresh run; yields (handle, run_dir); always stopped afterwards."""
    from a2c.runtime.grader_service import start_grader_service as start_service

    handles = []

    def start(run: Path | None = None, **overrides):
        run = run or make_run(**overrides)
        handle = start_service(run, timeout_s=30)
        handles.append(handle)
        return handle, run

    yield start
    for h in handles:
        if h.alive():
            h.kill()
            h.proc.wait(10)

