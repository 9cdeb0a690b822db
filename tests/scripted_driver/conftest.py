"""Fixtures for the scripted driver tests: a parsed script and a running driver."""

from __future__ import annotations

import pytest
from sd_requests import SCRIPT

from a2c.agents.scripted_driver import ScriptedDriver, parse


@pytest.fixture
def script():
    return parse(SCRIPT, "test-script.yaml")


@pytest.fixture
def driver(script, tmp_path):
    d = ScriptedDriver(script, log=tmp_path / "driver.jsonl", model="claude-sonnet-4-5")
    d.base = d.start()
    yield d
    d.stop()
