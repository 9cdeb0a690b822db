"""Helpers for run tests: throwaway agent bundles whose launch.sh is a shell script."""

from __future__ import annotations

import pytest
import yaml
from driver_helpers import fake_vllm_executable
from scripted_agents import make_agent


@pytest.fixture
def agent_factory(tmp_path):
    return lambda agent_id, script: make_agent(tmp_path, agent_id, script)


@pytest.fixture
def drivers(tmp_path, monkeypatch):
    """A drivers file whose vllm section runs the stand-in vLLM (driver_helpers); returns a
    writer of more of that section."""
    exe = fake_vllm_executable(tmp_path)
    path = tmp_path / "drivers.yaml"
    monkeypatch.setenv("A2C_DRIVERS_FILE", str(path))

    def write(**vllm):
        path.write_text(yaml.safe_dump({"vllm": {"executable": str(exe), **vllm}}))
        return path
    write()
    return write
