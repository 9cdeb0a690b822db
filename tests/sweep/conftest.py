"""Fixtures of the sweep tests: a private copy of the shipped specs to write suites into."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo_specs(tmp_path) -> Path:
    """specs/ of the checkout (tasks, agents, suites, base), copied: suites can be added freely."""
    dest = tmp_path / "specs"
    shutil.copytree(REPO / "specs", dest)
    return dest


@pytest.fixture
def write_suite(repo_specs):
    def write(text: str, name: str = "s") -> Path:
        path = repo_specs / "suites" / f"{name}.yaml"
        path.write_text("apiVersion: a2c/v1\nkind: Suite\nid: " + name + "\ntitle: S\n" + text)
        return path
    return write
