"""Helpers shared by the scaffold end-to-end tests (imported by name): which scaffolds, their
compiled specs, whether one is installed where the sandbox looks, what the runs need."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from a2c.paths import project_root

SCAFFOLDS = ["claude-code", "codex", "gemini-cli", "opencode", "mini-swe-agent", "openhands"]


def sandbox_path() -> list[str]:
    """Where the sandboxed agent looks for commands (runtime/sandbox/local.py agent_env)."""
    return [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]


def agent_spec(agent_id: str) -> dict:
    path = project_root() / "generated" / "agents" / agent_id / "agent.json"
    return json.loads(path.read_text())["agent"]


def installed(agent_id: str) -> str | None:
    command = agent_spec(agent_id)["install"]["check"]
    return shutil.which(command, path=os.pathsep.join(sandbox_path()))


def needs():
    """a2c.runtime.run, once the gateway, the scripted driver and bubblewrap are all there."""
    run_mod = pytest.importorskip("a2c.runtime.run")
    pytest.importorskip("a2c.runtime.driver_gateway")
    pytest.importorskip("a2c.agents.scripted_driver")
    from a2c.runtime.sandbox.local import bwrap_works
    if not bwrap_works():
        pytest.skip("bubblewrap does not work here: the scaffolds are tested in its sandbox")
    return run_mod
