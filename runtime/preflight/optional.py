"""The optional parts of `a2c doctor`: node and npm (the npm scaffolds), each LLM scaffold's
install, Ray (`a2c sweep`), and the A2C_* variables set but never read.

Why apart: none of them is on the demo's path (demo.py), so a missing one is a warning and
`a2c doctor` exits 3 rather than 1.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from a2c.contracts.records import Record
from a2c.contracts.spec import AgentSpec

from .row import MISSING, OK, WARN, Check, run_probe


def _node_version() -> str:
    try:
        from a2c.runtime.scaffold_tools import NODE_VERSION
    except ImportError:   # pragma: no cover - before the tool prefix
        from a2c.runtime.sandbox.docker_scaffolds import NODE_VERSION
    return NODE_VERSION


def node_check() -> Check:
    """The host's node and npm: npm installs the npm scaffolds, which run on the node release
    a2c pins and installs itself (from the npm registry), so the host's version only needs to
    run npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    pinned = (f"npm installs the npm scaffolds; they run on node {_node_version()}, which a2c "
              "installs from the npm registry")
    if not node or not npm:
        absent = " and ".join(n for n, w in (("node", node), ("npm", npm)) if not w)
        return Check("node", WARN, f"{absent} not on the PATH: {pinned}",
                     "apt-get install nodejs npm")
    node_ok, node_v = run_probe([node, "--version"])
    npm_ok, npm_v = run_probe([npm, "--version"])
    if not (node_ok and npm_ok):
        return Check("node", WARN, f"{node} --version: {node_v}; {npm} --version: {npm_v}",
                     "apt-get install --reinstall nodejs npm")
    return Check("node", OK, f"host node {node_v} ({node}), npm {npm_v}: {pinned}")


@dataclass
class InstallStep(Record):
    """One install step as `runtime/run/scaffold.py` lists it: npm, pip or a command."""

    kind: str = ""
    command: str = ""


def install_blockers(agent: dict | AgentSpec) -> list[str]:
    """What `agent`'s install steps need that this machine lacks: npm for npm packages, the
    program an install command runs (OpenHands' uv), and a `--python X.Y` newer than a2c's
    that no such program can fetch."""
    from a2c.runtime.run.scaffold import install_steps
    out = []
    for step in (InstallStep.from_dict(s) for s in install_steps(agent)):
        if step.kind == "npm" and not shutil.which("npm"):
            out.append("npm is not on the PATH (apt-get install nodejs npm)")
        if step.kind != "command":
            continue
        try:
            words = shlex.split(step.command)
        except ValueError:
            words = step.command.split()
        program = next((w for w in words if not re.fullmatch(r"[A-Za-z_]\w*=.*", w)), None)
        if program and not shutil.which(program):
            out.append(f"its install runs `{program}`, which is not on the PATH")
            wanted = re.search(r"--python[= ](\d+)\.(\d+)", step.command)
            if wanted and tuple(map(int, wanted.groups())) > sys.version_info[:2]:
                out.append(f"it needs Python {'.'.join(wanted.groups())} (a2c's is "
                           f"{sys.version_info[0]}.{sys.version_info[1]})")
    return out


def scaffold_checks(agents: Iterable[dict | AgentSpec], search_path: str | None = None) -> list[Check]:
    """One row per CLI scaffold among `agents` (resolved specs): its command found or not; when
    not, `a2c agents install ID`, or why its install cannot run here (docs/agents.md)."""
    from a2c.runtime.run.scaffold import check_command
    out = []
    for raw in agents:
        agent = raw if isinstance(raw, AgentSpec) else AgentSpec.from_dict(raw)
        if agent.type != "cli":
            continue
        command = check_command(agent)
        where = shutil.which(command, path=search_path) if command else None
        name = f"scaffold {agent.id}"
        if where:
            out.append(Check(name, OK, f"{command} at {where}"))
            continue
        blockers = install_blockers(agent)
        if blockers:
            out.append(Check(name, MISSING, f"{command} is not installed, "
                             f"and its install cannot run here: {'; '.join(blockers)}",
                             f"see docs/agents.md ({agent.title or agent.id}): what "
                             "its install needs, and where it can run"))
        else:
            out.append(Check(name, MISSING, f"{command} is not installed",
                             f"a2c agents install {agent.id}"))
    return out


def ray_check() -> Check:
    try:
        import ray
    except ImportError:
        return Check("Ray", MISSING, "not installed: a2c sweep cannot run",
                     "pip install 'a2c[sweep]'")
    return Check("Ray", OK, f"ray {getattr(ray, '__version__', '?')}")


def environment_check(environ: dict[str, str] | None = None) -> Check:
    """`A2C_*` variables a2c does not read (a2c/settings.py declares every one it does): a
    misspelt name, or one of the agent knobs that became params, would otherwise do nothing."""
    from a2c.settings import unread
    names = unread(environ)
    if not names:
        return Check("A2C_* variables", OK, "every one set is one a2c reads")
    return Check("A2C_* variables", WARN,
                 f"{', '.join(names)}: set, but a2c reads no such variable (docs/settings.md; "
                 "an agent's knobs are its params: a2c agents params ID, then "
                 "a2c run --agent-param NAME=VALUE)", "unset " + " ".join(names))
