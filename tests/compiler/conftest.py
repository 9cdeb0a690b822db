from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "specs"


@pytest.fixture
def specs(tmp_path) -> Path:
    """A private copy of tests/fixtures/specs (tasks/, base/) to edit freely."""
    dest = tmp_path / "specs"
    shutil.copytree(FIXTURES, dest)
    return dest


@pytest.fixture
def run_cli(capsys):
    """Run `a2c ARGS...` in-process; return (exit code, stdout, stderr)."""
    from a2c.cli import main

    def run(*args):
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run
