"""Helpers shared by the scaffold end-to-end tests (imported by name): which scaffolds, their
compiled specs, whether one is installed where the sandbox looks, what the runs need."""

from __future__ import annotations

import json
import os

import pytest

from a2c.paths import project_root

SCAFFOLDS = ["claude-code", "codex", "gemini-cli", "opencode", "mini-swe-agent", "openhands"]


def sandbox_path() -> list[str]:
    """Where the sandboxed agent looks for commands (runtime/sandbox/local.py agent_env)."""
    from a2c.runtime.scaffold_tools import search_path
    return search_path().split(os.pathsep)


def agent_spec(agent_id: str) -> dict:
    path = project_root() / "generated" / "agents" / agent_id / "agent.json"
    return json.loads(path.read_text())["agent"]


def skip_unless_installed(agent_id: str) -> None:
    """Skip with the one line set-up printed for this scaffold (why it is missing, how to
    install it): an optional scaffold that did not install is a skip, never a failure."""
    from a2c.runtime.scaffold_tools import missing_reason
    reason = missing_reason(agent_spec(agent_id))
    if reason:
        pytest.skip(reason)


def needs():
    """a2c.runtime.run, once the gateway, the scripted driver and bubblewrap are all there."""
    run_mod = pytest.importorskip("a2c.runtime.run")
    pytest.importorskip("a2c.runtime.driver_gateway")
    pytest.importorskip("a2c.agents.scripted_driver")
    from a2c.runtime.sandbox.local import bwrap_works
    if not bwrap_works():
        pytest.skip("bubblewrap does not work here: the scaffolds are tested in its sandbox")
    return run_mod
