"""Helpers for run tests: throwaway agent bundles whose launch.sh is a shell script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2c.canonical import sha256_file, sha256_json
from a2c.contracts.bundle import BUNDLE_FORMAT, bundle_digest


def make_agent(root: Path, agent_id: str, script: str) -> Path:
    folder = root / "agents" / agent_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "launch.sh").write_text("#!/usr/bin/env bash\n" + script)
    (folder / "prompt.md").write_text("{{ instructions }}\n")
    agent = {"id": agent_id, "title": agent_id, "type": "reference",
             "launch": {"command": "bash", "env": {}, "pass_env": []},
             "driver": {"required": False, "default": None, "models": []},
             "transcript": {"source": "stdout", "format": "text", "ext": "log", "path": None},
             "prompt": "{{ instructions }}\n"}
    files = {rel: sha256_file(folder / rel) for rel in ("launch.sh", "prompt.md")}
    spec_hash = sha256_json(agent)
    manifest = {"format": BUNDLE_FORMAT, "compiler_version": "test", "kind": "Agent",
                "id": agent_id, "spec_hash": spec_hash, "agent": agent, "files": files,
                "digest": bundle_digest(spec_hash, files)}
    (folder / "agent.json").write_text(json.dumps(manifest, indent=2))
    return folder


@pytest.fixture
def agent_factory(tmp_path):
    return lambda agent_id, script: make_agent(tmp_path, agent_id, script)
