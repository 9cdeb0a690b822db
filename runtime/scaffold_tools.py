"""a2c's own tool prefix for the LLM scaffolds: where `a2c agents install` puts each pinned
scaffold, apart from the machine's global npm and from every other clone's set-up.

Why a prefix of its own: a scaffold installed into the machine's global npm prefix (/usr)
outlives every clone and is shared by every set-up on the machine. Two set-ups writing it at
once broke one of them, and a half install left there (a package folder without its command)
passed for a whole one. So:

    PREFIX/lib/a2c-tools/
        node-<version>/              node itself, from npm's node-linux-<arch> package
        <agent id>-<key>/            one scaffold at one pin (key: a digest of what it installs)
            a2c-tool.json            what it holds; written last, so a folder without it is none
            npm/ | venv/             the packages (npm --prefix, or a virtual environment)
            bin/<command>            wrappers: node's folder first on PATH, or the venv's python
        .<folder>.tmp-*              an install in progress (a2c.fsutil.staged_dir)
        logs/<agent id>.log          the last install's commands and output
    PREFIX/bin/<command>          -> ../lib/a2c-tools/<agent id>-<key>/bin/<command>

PREFIX is a2c's virtual environment when a2c runs from one (the local sandbox binds it and puts
its bin/ first on the agent's PATH), else /usr/local. Every install goes into a fresh staging
folder and is renamed into place whole, and a command's link is replaced by one rename. A failed
or interrupted install therefore leaves nothing that looks installed; two set-ups at once
either have their own prefix (two clones) or wait for each other on a lock per tool (one).

Node is pinned here (NODE_VERSION), not taken from the machine: Debian's nodejs may be older than
a scaffold asks for (Claude Code's pin wants node 22). The docker backend's tools image installs
the same release (runtime/sandbox/docker_scaffolds.py). The machine's npm is only the installer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.spec import AgentSpec, DriverSpec
from a2c.errors import RunError
from a2c.fsutil import file_lock, staged_dir
from a2c.runtime.tool_commands import (  # noqa: F401 - the install errors' home, re-exported
    TAIL_LINES,
    InstallError,
    InstallLog,
    npm_install,
    package_bins,
)

NODE_VERSION = "22.23.5"     # npm's node-linux-<arch>: the official node binaries
TOOL_RECIPE = 1              # bump when what a tool folder holds changes
MANIFEST = "a2c-tool.json"


def node_package() -> str:
    """npm's package of the official node binaries for this machine, at NODE_VERSION."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower())
    if arch is None:
        raise RunError(f"no node build for this machine ({platform.machine()})")
    return f"node-linux-{arch}@{NODE_VERSION}"


def default_prefix() -> Path:
    """a2c's virtual environment when it runs from one, else /usr/local."""
    return Path(sys.prefix) if sys.prefix != sys.base_prefix else Path("/usr/local")


def tools_root(prefix: Path) -> Path:
    return prefix / "lib" / "a2c-tools"


def search_path(prefix: Path | None = None) -> str:
    """Where the sandbox's agent looks for commands: PREFIX/bin, the interpreter's bin/, the
    system folders (runtime/sandbox/local.py agent_env)."""
    parts = [str((prefix or default_prefix()) / "bin"), str(Path(sys.executable).parent),
             "/usr/local/bin", "/usr/bin", "/bin"]
    return os.pathsep.join(dict.fromkeys(parts))


def find_command(command: str, prefix: Path | None = None) -> str | None:
    """The command the sandboxed agent would run, by the sandbox's PATH (not the caller's)."""
    return shutil.which(command, path=search_path(prefix))


# ----------------------------------------------------------------------------- what to install
@dataclass(frozen=True)
class Tool:
    """One pinned package set of one agent in the prefix: npm CLIs or a pip venv."""

    agent: str
    kind: str                       # npm | pip
    packages: tuple[str, ...]
    prefix: Path

    @property
    def key(self) -> str:
        what = {"recipe": TOOL_RECIPE, "kind": self.kind, "packages": sorted(self.packages),
                "node": NODE_VERSION if self.kind == "npm" else None,
                "python": f"{sys.version_info[0]}.{sys.version_info[1]}"
                if self.kind == "pip" else None}
        digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
        return digest[:12]

    @property
    def folder(self) -> Path:
        return tools_root(self.prefix) / f"{self.agent}-{self.key}"

    def describe(self) -> str:
        names = " ".join(self.packages)
        return f"{names} on node {NODE_VERSION}" if self.kind == "npm" else names

    def manifest(self) -> dict | None:
        """The folder's manifest when it holds this exact tool, whole; else None."""
        try:
            data = json.loads((self.folder / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        ok = data.get("key") == self.key and data.get("agent") == self.agent
        return data if ok and isinstance(data.get("commands"), list) else None


def node_tool(prefix: Path) -> Tool:
    return Tool("node", "node", (node_package(),), prefix)


def node_bin(prefix: Path) -> Path:
    """The folder holding the pinned `node` (and nothing else), put first on a CLI's PATH."""
    name = node_package().rsplit("@", 1)[0]
    return node_tool(prefix).folder / "npm" / "node_modules" / name / "bin"


def tools_of(agent, prefix: Path) -> list[Tool]:
    """The agent's npm and pip entries as tools (its `commands:` entries are not tools: they
    run as written, see a2c/cli/agents.py)."""
    from a2c.runtime.run.scaffold import install_steps, typed
    ident = typed(agent).id
    return [Tool(ident, step["kind"], tuple(step["packages"]), prefix)
            for step in install_steps(agent) if step["kind"] in ("npm", "pip")]


# Run by the venv's python: the console scripts of the named distributions only (not those of
# their dependencies: litellm's, hf's, tqdm's stay inside the venv).
CONSOLE_SCRIPTS = (
    "import importlib.metadata as md, json, sys\n"
    "print(json.dumps(sorted({ep.name for n in sys.argv[1:] "
    "for ep in md.distribution(n).entry_points.select(group='console_scripts')})))\n")


def distribution_name(requirement: str) -> str:
    import re
    return re.split(r"[=<>!~\[; ]", requirement, maxsplit=1)[0]


def _wrapper(lines: list[str]) -> str:
    return "#!/bin/sh\n" + "\n".join(lines) + "\n"


def _fill_npm(tool: Tool, stage: Path, log: InstallLog) -> list[str]:
    npm_install(stage / "npm", list(tool.packages), log)
    node = node_bin(tool.prefix)
    commands = []
    for spec in tool.packages:
        for command in package_bins(stage / "npm" / "node_modules", spec):
            target = tool.folder / "npm" / "node_modules" / ".bin" / command
            _write_exec(stage / "bin" / command, _wrapper([
                f"# a2c tool {tool.agent}: {spec}, on the pinned node {NODE_VERSION}",
                f"PATH={shlex.quote(str(node))}:$PATH; export PATH",
                f'exec {shlex.quote(str(target))} "$@"']))
            commands.append(command)
    return commands


def _fill_node(tool: Tool, stage: Path, log: InstallLog) -> list[str]:
    npm_install(stage / "npm", list(tool.packages), log)
    return []


def _fill_pip(tool: Tool, stage: Path, log: InstallLog) -> list[str]:
    """A venv of its own. Its console scripts' first lines name the staging folder, so each
    wrapper runs the script with the venv's python by its final path (a venv's python finds
    its packages by its own location, which the rename keeps)."""
    venv = stage / "venv"
    log.run([sys.executable, "-m", "venv", str(venv)], label="python -m venv")
    log.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input",
             "--disable-pip-version-check", "--progress-bar", "off", *tool.packages],
            label=f"pip install {' '.join(tool.packages)}")
    names = [distribution_name(p) for p in tool.packages]
    out = subprocess.run([str(venv / "bin" / "python"), "-c", CONSOLE_SCRIPTS, *names],
                         capture_output=True, text=True, check=True)
    commands = json.loads(out.stdout)
    final = tool.folder / "venv" / "bin"
    for command in commands:
        _write_exec(stage / "bin" / command, _wrapper([
            f"# a2c tool {tool.agent}: {' '.join(tool.packages)}",
            f'exec {shlex.quote(str(final / "python"))} '
            f'{shlex.quote(str(final / command))} "$@"']))
    return commands


FILLERS = {"npm": _fill_npm, "pip": _fill_pip, "node": _fill_node}


def _write_exec(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


# ----------------------------------------------------------------------------- installing
def ensure(tool: Tool, log: InstallLog, reinstall: bool = False) -> tuple[dict, bool]:
    """The tool whole in its folder: (its manifest, whether this call installed it). Filled in
    a staging folder beside its place and swapped in whole (a2c.fsutil.staged_dir), one
    installer at a time per tool (a second one waits, then finds it there)."""
    if tool.kind == "npm":
        ensure(node_tool(tool.prefix), log)
    with file_lock(tools_root(tool.prefix) / ".locks" / f"{tool.folder.name}.lock"):
        found = tool.manifest()
        if found and not reinstall:
            return found, False
        with staged_dir(tool.folder) as stage:
            commands = FILLERS[tool.kind](tool, stage, log)
            manifest = {"agent": tool.agent, "kind": tool.kind, "key": tool.key,
                        "packages": list(tool.packages), "commands": commands,
                        "node": NODE_VERSION if tool.kind in ("npm", "node") else None,
                        "recipe": TOOL_RECIPE}
            (stage / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
            stage.chmod(0o755)
        return manifest, True


def link_commands(tool: Tool, manifest: dict) -> list[Path]:
    """PREFIX/bin/<command> -> the tool's wrapper, each replaced by one rename."""
    bin_dir = tool.prefix / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    links = []
    for command in manifest["commands"]:
        link, target = bin_dir / command, tool.folder / "bin" / command
        if link.exists() and not link.is_symlink():
            raise InstallError(f"{link} exists and is not a link a2c made; remove it, then "
                               f"run a2c agents install {tool.agent} again")
        fresh = bin_dir / f".{command}.a2c-{os.getpid()}"
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(os.path.relpath(target, bin_dir))
        os.replace(fresh, link)
        links.append(link)
    return links


def prune(tool: Tool) -> list[Path]:
    """Remove the agent's other pins of the same kind (an earlier version of its spec)."""
    removed = []
    root = tools_root(tool.prefix)
    for folder in root.glob(f"{tool.agent}-*"):
        if folder == tool.folder or not (folder / MANIFEST).is_file():
            continue
        try:
            data = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        if data.get("agent") == tool.agent and data.get("kind") == tool.kind:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@dataclass(frozen=True)
class Outcome:
    """What installing one agent did, for its one line."""

    agent: str
    status: str                     # installed | present | failed | nothing
    detail: str
    seconds: float = 0.0
    error: InstallError | None = None


@dataclass(frozen=True)
class AgentRow:
    """One agent as `a2c agents list` shows it (and `--json` writes it): its type, default
    driver, the command the pre-flight looks for and whether the sandbox finds it, the install
    steps as printed, its declared params."""

    id: str
    type: str
    title: str
    driver: str | None
    command: str | None
    found: bool
    install: list[str]
    params: list[str]

    @classmethod
    def of(cls, agent: AgentSpec) -> AgentRow:
        from a2c.runtime.run.scaffold import check_command, install_steps
        command = check_command(agent) if agent.type == "cli" else None
        return cls(id=agent.id, type=agent.type, title=agent.title,
                   driver=agent.driver.default if isinstance(agent.driver, DriverSpec) else None,
                   command=command, found=bool(command and find_command(command)),
                   install=[step["shell"] for step in install_steps(agent)],
                   params=sorted(agent.params))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def install_plan(agent, prefix: Path) -> list[str]:
    """What `install_agent` would do for `agent`, one line each (`a2c agents install --dry-run`)."""
    from a2c.runtime.run.scaffold import install_steps
    lines = []
    for tool in tools_of(agent, prefix):
        if tool.kind == "npm":
            lines.append(f"npm install --prefix {tool.folder}/npm {' '.join(tool.packages)} "
                         f"(node {NODE_VERSION} in {node_tool(prefix).folder})")
        else:
            lines.append(f"python -m venv {tool.folder}/venv && pip install "
                         f"{' '.join(tool.packages)}")
        lines.append(f"ln -s {tool.folder}/bin/<its commands> {prefix / 'bin'}/")
    lines += [s["command"] for s in install_steps(agent) if s["kind"] == "command"]
    return lines


def install_agent(agent, prefix: Path, reinstall: bool = False,
                  echo: Callable[[str], None] | None = None) -> Outcome:
    """Install the agent's npm and pip tools into PREFIX and link their commands; its install
    `commands:` run as written with `bash -c` (they manage their own place). The outcome's line
    is kept beside the log (`missing_reason` reads it back for the tests' skip lines)."""
    outcome = _install_agent(agent, prefix, reinstall, echo)
    (tools_root(prefix) / "logs" / f"{outcome.agent}.outcome").write_text(
        f"{outcome.status}: {outcome.detail}\n")
    return outcome


def missing_reason(agent, prefix: Path | None = None) -> str | None:
    """None when the agent's command is where the sandbox looks; else one line: why not, and
    how to install it (the last install's failure when there was one)."""
    from a2c.runtime.run.scaffold import check_command, install_hint, typed
    command = check_command(agent)
    if command and find_command(command, prefix):
        return None
    ident = typed(agent).id
    try:
        last = (tools_root(prefix or default_prefix()) / "logs" / f"{ident}.outcome") \
            .read_text().strip()
    except OSError:
        last = ""
    why = f"the last install {last}" if last.startswith("failed") else "not installed"
    return f"{ident}: `{command}` {why}; {install_hint(agent)}"


def _install_agent(agent, prefix: Path, reinstall: bool,
                   echo: Callable[[str], None] | None) -> Outcome:
    from a2c.runtime.run.scaffold import install_steps, typed
    ident = typed(agent).id
    logs = tools_root(prefix) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = InstallLog(logs / f"{ident}.log", echo)
    log.path.write_text(f"# a2c agents install {ident} into {prefix}\n")
    start = time.monotonic()
    fresh, described = False, []
    try:
        for tool in tools_of(agent, prefix):
            manifest, did = ensure(tool, log, reinstall=reinstall)
            link_commands(tool, manifest)
            if did:
                prune(tool)
            fresh = fresh or did
            described.append(tool.describe())
        for step in install_steps(agent):
            if step["kind"] == "command":
                log.run(["bash", "-c", step["command"]])
                fresh = True
                described.append(step["command"])
    except InstallError as exc:
        return Outcome(ident, "failed", str(exc), time.monotonic() - start, exc)
    if not described:
        return Outcome(ident, "nothing", "no install entries")
    return Outcome(ident, "installed" if fresh else "present", "; ".join(described),
                   time.monotonic() - start)


__all__ = ["InstallError", "NODE_VERSION", "Outcome", "Tool", "default_prefix", "ensure",
           "find_command", "install_agent", "link_commands", "missing_reason", "node_bin", "node_package",
           "npm_install", "package_bins", "search_path", "tools_of", "tools_root"]
