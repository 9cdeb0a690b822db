"""The compiled agent bundles the commands list (generated/agents/<id>/agent.json): read by
`a2c agents` and by `a2c doctor` (a row per scaffold), apart from either command's module.
"""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.spec import AgentSpec


def _generated_agents() -> Path:
    from a2c.paths import project_root
    return project_root() / "generated" / "agents"


def load_agents() -> list[AgentSpec]:
    """Every compiled agent bundle's resolved spec, by id."""
    from a2c.contracts.bundle import load_bundle
    from a2c.runtime.run.resolve import AGENT_MANIFEST
    root = _generated_agents()
    agents = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if (folder / AGENT_MANIFEST).is_file():
            agents.append(load_bundle(folder, kind="Agent", verify=False).agent)
    return agents
