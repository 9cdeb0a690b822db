"""Fixtures for the analysis tests: recorded runs built by tests/fixtures/runs/make_fixture_run.py."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

FIXTURE_SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "make_fixture_run.py"


def _load_maker():
    spec = importlib.util.spec_from_file_location("a2c_make_fixture_run", FIXTURE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def maker():
    return _load_maker()


@pytest.fixture(scope="session")
def pristine_run(tmp_path_factory, maker) -> Path:
    """The default 6-submission fixture run, built once per session (do not modify it)."""
    return maker.make_run(tmp_path_factory.mktemp("pristine") / "run")


@pytest.fixture
def fixture_run(tmp_path, pristine_run) -> Path:
    """A private copy of the fixture run that a test may edit."""
    dest = tmp_path / "run"
    shutil.copytree(pristine_run, dest, symlinks=True)
    return dest
