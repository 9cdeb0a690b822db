"""Throwaway agent bundles for tests: an agent whose launch.sh is a few lines of shell (a hostile
agent, a forker, an idle one), compiled by hand into a verified bundle. Importable from every
test (tests/ is on sys.path through tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.bundle import write_agent_manifest


def make_agent(root: Path, agent_id: str, script: str, pass_env: list[str] | None = None,
               transcript: dict | None = None, **fields) -> Path:
    """ROOT/agents/AGENT_ID: an agent bundle whose launch.sh is `script`; `fields` replace the
    resolved spec's (e.g. type="cli", driver={...}, install={...} for a scaffold)."""
    folder = root / "agents" / agent_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "launch.sh").write_text("#!/usr/bin/env bash\n" + script)
    (folder / "prompt.md").write_text("{{ instructions }}\n")
    agent = {"id": agent_id, "title": agent_id, "type": "reference",
             "launch": {"command": "bash", "env": {}, "pass_env": list(pass_env or [])},
             "driver": {"required": False, "default": None, "models": []},
             "transcript": transcript or {"source": "stdout", "format": "text", "ext": "log",
                                          "path": None},
             "prompt": "{{ instructions }}\n", **fields}
    write_agent_manifest(folder, agent, "test")
    return folder


# Python for probe agents (run inside a sandbox): try to read or append to a path, say what
# happened ("READ <start>" / "WROTE", else "ERR <exception type>").
PROBE_IO = r"""
def tryread(p):
    try:
        with open(p) as f:
            return "READ " + f.read()[:20]
    except Exception as e:
        return "ERR " + type(e).__name__
def trywrite(p):
    try:
        with open(p, "a") as f:
            f.write("tampered\n")
        return "WROTE"
    except Exception as e:
        return "ERR " + type(e).__name__
"""
