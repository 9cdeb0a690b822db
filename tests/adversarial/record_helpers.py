"""Helpers of tests/adversarial/test_record.py: a hostile shell agent's bundle, and what of a
run directory's private parts another local user could read."""

from __future__ import annotations

import stat
from pathlib import Path

from scripted_agents import make_agent

PRIVATE = ("run.json", "events.jsonl", "submissions.jsonl", "results", "grader", "logs",
           "snapshots.git", "bundle/grader", "bundle/bundle.json")


def private_modes(run_dir: Path) -> list[str]:
    """Paths under the private parts that a group or other user could read or list: readable
    (r for group or other) and reachable (x for group or other on every folder above it)."""
    def reachable(path: Path) -> bool:
        folder = path.parent
        while True:
            if not stat.S_IMODE(folder.stat().st_mode) & 0o011:
                return False
            if folder == run_dir or folder == folder.parent:
                return True
            folder = folder.parent

    bad = []
    for rel in PRIVATE:
        top = run_dir / rel
        if not top.exists():
            continue
        for path in [top, *(top.rglob("*") if top.is_dir() else [])]:
            if path.is_symlink() or path.is_socket():
                continue
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o044 and reachable(path):
                bad.append(f"{path.relative_to(run_dir)} {mode:o}")
    return bad


def shell_agent(root: Path, agent_id: str, script: str) -> Path:
    """An agent bundle whose launch.sh is `script` (a hostile agent in a few lines of shell)."""
    return make_agent(root, agent_id, script)
