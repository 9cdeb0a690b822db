"""Helpers for run tests: throwaway agent bundles whose launch.sh is a shell script."""

from __future__ import annotations

import pytest
from scripted_agents import make_agent


@pytest.fixture
def agent_factory(tmp_path):
    return lambda agent_id, script: make_agent(tmp_path, agent_id, script)
