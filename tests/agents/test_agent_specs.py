"""The shipped scaffold specs (specs/agents/*.yaml): pinned installs, a wire, the gateway in their
environment, no provider key passed through, configuration files that name the gateway."""

from __future__ import annotations

import json
import re

import pytest

from a2c.compiler.build import plan
from a2c.paths import project_root

SCAFFOLDS = ["claude-code", "codex", "gemini-cli", "opencode", "mini-swe-agent", "openhands"]
WIRES = {"claude-code": "anthropic", "codex": "openai-responses", "gemini-cli": "gemini",
         "opencode": "anthropic", "mini-swe-agent": "openai-chat", "openhands": "anthropic"}
PROVIDER_KEY = re.compile(r"(_API_KEY|_AUTH_TOKEN)$")


def agents() -> dict[str, dict]:
    root = project_root() / "specs" / "agents"
    out = {}
    for artifact in plan(sorted(root.glob("*.yaml"))):
        if artifact.kind == "Agent":
            out[artifact.id] = json.loads(artifact.files["agent.json"])["agent"]
    return out


AGENTS = agents()


def test_every_scaffold_is_shipped():
    assert sorted(a for a, spec in AGENTS.items() if spec["type"] == "cli") == sorted(SCAFFOLDS)


@pytest.mark.parametrize("agent_id", SCAFFOLDS)
def test_scaffold_spec(agent_id):
    agent = AGENTS[agent_id]
    assert agent["driver"]["wire"] == WIRES[agent_id]
    assert "/" in agent["driver"]["default"]          # provider/model
    install = agent["install"]
    assert install["check"] and install["check"] == agent["launch"]["command"].split()[0]
    pinned = [p for p in install["npm"] if p.rsplit("@", 1)[-1] == agent["version"]]
    pinned += [p for p in install["pip"] if p.endswith("==" + agent["version"])]
    pinned += [c for c in install["commands"] if "==" + agent["version"] in c]
    assert pinned, f"{agent_id}: no install entry pins version {agent['version']}"
    # Never a provider key from the host: the gateway keeps it (the run refuses one too).
    assert not [k for k in agent["launch"]["pass_env"] if PROVIDER_KEY.search(k)]
    # The gateway's URL and per-run key reach the scaffold through its env or its files.
    text = json.dumps(agent["launch"]["env"]) + json.dumps(agent["launch"]["files"])
    assert "${A2C_DRIVER_URL}" in text
    assert "A2C_DRIVER_KEY" in text
    assert agent["transcript"]["native"]


def test_no_secret_values_in_bundles():
    """The bundle holds variable references only: no key, URL or port of a particular run."""
    for agent_id in SCAFFOLDS:
        text = json.dumps(AGENTS[agent_id])
        assert "127.0.0.1" not in text and "sk-" not in text


def test_launcher_is_identical_across_builds():
    root = project_root() / "specs" / "agents"
    first = {a.id: a.files for a in plan(sorted(root.glob("*.yaml")))}
    second = {a.id: a.files for a in plan(sorted(root.glob("*.yaml")))}
    assert first == second
