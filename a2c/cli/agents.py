"""`a2c agents list`, `a2c agents params ID` and `a2c agents install ID|--all [--dry-run]
[--prefix DIR]`.

The agents are the compiled agent bundles (generated/agents/<id>/agent.json; an id with no bundle
is compiled from its spec first, as `a2c run` does). `install` runs the bundle's install entries
on this machine, where the local backend's sandbox sees them, printing every command first:

- npm packages: `npm install -g PKG@VERSION ...` (npm's global prefix, /usr or /usr/local: a
  system folder the sandbox binds read-only);
- pip packages: a virtual environment of their own, PREFIX/lib/a2c-agents/<id>, with its new
  commands linked into PREFIX/bin. PREFIX is a2c's own virtual environment when a2c runs from one
  (the sandbox binds it and puts its bin/ first on PATH), else /usr/local; so a scaffold's
  dependencies never mix with a2c's;
- other commands: run with `bash -c`.

The same steps are what a failed pre-flight of `a2c run` prints (runtime/run/scaffold.py).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from a2c.errors import RunError

if TYPE_CHECKING:
    from a2c.contracts.spec import AgentSpec


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "agents", help="list the agent scaffolds and install them on this machine",
        description="The compiled agent bundles (generated/agents/): list them, or install a "
                    "scaffold's pinned CLI where the local sandbox sees it.")
    sub = parser.add_subparsers(dest="agents_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])

    p_list = sub.add_parser("list", help="agents, their type, install steps, and whether their "
                                         "command is found here")
    p_list.add_argument("--json", action="store_true", help="print one JSON object")
    p_list.set_defaults(handler=handle_list)

    p_params = sub.add_parser("params", help="an agent's declared params: type, default, "
                                             "bounds and what each does (set them with "
                                             "a2c run --agent-param NAME=VALUE)")
    p_params.add_argument("agent", metavar="ID", help="agent id (or bundle, spec)")
    p_params.add_argument("--json", action="store_true", help="print one JSON object")
    p_params.set_defaults(handler=handle_params)

    p_inst = sub.add_parser("install", help="install a scaffold (npm, pip, commands); prints "
                                            "every command it runs")
    p_inst.add_argument("agent", nargs="*", metavar="ID", help="agent ids (or bundles, specs)")
    p_inst.add_argument("--all", action="store_true", help="every agent with install steps")
    p_inst.add_argument("--dry-run", action="store_true", help="print the commands only")
    p_inst.add_argument("--missing", action="store_true",
                        help="skip a scaffold whose command the sandbox already finds (set-up "
                             "scripts run again); its installed version is not checked")
    p_inst.add_argument("--prefix", help="where pip scaffolds go (PREFIX/lib/a2c-agents/<id>, "
                                         "commands in PREFIX/bin); default: a2c's virtual "
                                         "environment, else /usr/local")
    p_inst.set_defaults(handler=handle_install)


# ----------------------------------------------------------------------------- bundles
def _generated_agents() -> Path:
    from a2c.paths import project_root
    return project_root() / "generated" / "agents"


def load_agents() -> list[dict]:
    """Every compiled agent bundle's resolved spec, by id."""
    from a2c.contracts.bundle import load_bundle
    from a2c.runtime.run.resolve import AGENT_MANIFEST
    root = _generated_agents()
    agents = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if (folder / AGENT_MANIFEST).is_file():
            agents.append(load_bundle(folder, kind="Agent", verify=False).agent)
    return agents


def load_one(ref: str) -> dict:
    """The resolved spec of agent `ref`: its bundle, compiled from its spec when none is built."""
    import tempfile

    from a2c.cli.run import compile_if_needed
    from a2c.contracts.bundle import load_bundle
    work = Path(tempfile.mkdtemp(prefix="a2c-agents-"))
    try:
        folder = compile_if_needed(ref, "Agent", work)
        from a2c.runtime.run.resolve import resolve_agent_bundle
        return load_bundle(resolve_agent_bundle(folder), kind="Agent", verify=False).agent
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- list
def handle_list(args: argparse.Namespace) -> int:
    from a2c.contracts.spec import DriverSpec
    from a2c.runtime.run.scaffold import check_command, install_steps, typed
    rows = []
    for agent in map(typed, load_agents()):
        command = check_command(agent) if agent.type == "cli" else None
        driver = agent.driver.default if isinstance(agent.driver, DriverSpec) else None
        rows.append({"id": agent.id, "type": agent.get("type"), "title": agent.get("title"),
                     "driver": driver, "command": command,
                     "found": bool(command and shutil.which(command, path=_search_path())),
                     "install": [s["shell"] for s in install_steps(agent)],
                     "params": sorted(agent.params)})
    if args.json:
        import json
        print(json.dumps({"agents": rows}, indent=2))
        return 0
    from rich.console import Console

    from a2c.cli.tables import listing
    cells = []
    for row in rows:
        found = "" if not row["command"] else (" (found)" if row["found"] else " (not found)")
        cells.append([row["id"], str(row["type"]), row["driver"] or "—",
                      (row["command"] or "—") + found, "\n".join(row["install"]) or "—"])
    Console(highlight=False).print(listing("agents (generated/agents)", [
        "id", "type", "driver", "command", "install"], cells, ids=("id", "driver")))
    return 0


# ----------------------------------------------------------------------------- params
def _bounds(decl: dict) -> str:
    parts = []
    if "minimum" in decl:
        parts.append(f">= {decl['minimum']}")
    if "maximum" in decl:
        parts.append(f"<= {decl['maximum']}")
    if decl.get("enum"):
        parts.append("one of " + ", ".join(map(str, decl["enum"])))
    return "; ".join(parts) or "—"


def handle_params(args: argparse.Namespace) -> int:
    """What `--agent-param` accepts for one agent, from its resolved spec (so from the bundle a
    run would use)."""
    from a2c.contracts.agent_params import declarations
    agent = load_one(args.agent)
    params = declarations(agent)
    if args.json:
        import json
        print(json.dumps({"agent": agent["id"], "params": params}, indent=2))
        return 0
    if not params:
        print(f"{agent['id']} declares no params")
        return 0
    from rich.console import Console

    from a2c.cli.tables import listing
    cells = [[name, str(decl.get("type")), json_value(decl.get("default")), _bounds(decl),
              str(decl.get("description") or "")] for name, decl in params.items()]
    Console(highlight=False).print(listing(
        f"{agent['id']} params (a2c run --agent-param NAME=VALUE)",
        ["name", "type", "default", "bounds", "description"], cells, ids=("name",)))
    return 0


def json_value(value) -> str:
    """A default as the user would type it back (true, 0.0001, "text")."""
    import json
    return value if isinstance(value, str) else json.dumps(value)


# ----------------------------------------------------------------------------- install
def default_prefix() -> Path:
    """a2c's virtual environment when it runs from one, else /usr/local."""
    return Path(sys.prefix) if sys.prefix != sys.base_prefix else Path("/usr/local")


def _search_path(prefix: Path | None = None) -> str:
    """Where the sandbox's agent looks for commands: PREFIX/bin, the interpreter's bin/, the
    system folders (runtime/sandbox/local.py agent_env)."""
    parts = [str((prefix or default_prefix()) / "bin"), str(Path(sys.executable).parent),
             "/usr/local/bin", "/usr/bin", "/bin"]
    return os.pathsep.join(dict.fromkeys(parts))


def plan(agent: dict | AgentSpec, prefix: Path) -> list[dict]:
    """The commands that install `agent`: {argv | shell, print, kind} in order."""
    from a2c.runtime.run.scaffold import install_steps, typed
    out = []
    for step in install_steps(agent):
        if step["kind"] == "npm":
            argv = ["npm", "install", "-g", *step["packages"]]
            out.append({"kind": "npm", "argv": argv, "print": shlex.join(argv)})
        elif step["kind"] == "pip":
            venv = prefix / "lib" / "a2c-agents" / typed(agent).id
            create = [sys.executable, "-m", "venv", "--clear", str(venv)]
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-input",
                   "--disable-pip-version-check", *step["packages"]]
            out.append({"kind": "venv", "argv": create, "print": shlex.join(create)})
            out.append({"kind": "pip", "argv": pip, "print": shlex.join(pip), "venv": venv})
            out.append({"kind": "link", "venv": venv, "bin": prefix / "bin",
                        "print": f"ln -sf {venv}/bin/<its new commands> {prefix / 'bin'}/"})
        else:
            argv = ["bash", "-c", step["command"]]
            out.append({"kind": "command", "argv": argv, "print": step["command"]})
    return out


def _venv_bin_names(venv: Path) -> set[str]:
    folder = venv / "bin"
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


BASE_VENV_COMMANDS = ("python", "pip", "activate")


def _link(venv: Path, bin_dir: Path, before: set[str], echo) -> list[str]:
    """Link the commands the pip step added to the venv's bin/ into PREFIX/bin."""
    linked = []
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in sorted(_venv_bin_names(venv) - before):
        if name.startswith(BASE_VENV_COMMANDS) or name.lower().startswith("activate"):
            continue
        target, link = venv / "bin" / name, bin_dir / name
        if link.exists() and not link.is_symlink():
            echo(f"note: {link} exists and is not a link; left as it is")
            continue
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target)
        echo(f"linked {link} -> {target}")
        linked.append(name)
    return linked


def install(agent: dict | AgentSpec, prefix: Path, dry_run: bool, echo=print) -> list[dict]:
    from a2c.runtime.run.scaffold import typed
    steps = plan(agent, prefix)
    ident = typed(agent).id
    if not steps:
        echo(f"{ident}: nothing to install ({typed(agent).type} agent without install "
             "entries)")
        return steps
    before: set[str] = set()
    for step in steps:
        echo(("would run: " if dry_run else "+ ") + step["print"])
        if dry_run:
            continue
        if step["kind"] == "link":
            _link(step["venv"], step["bin"], before, echo)
            continue
        if step["kind"] == "pip":
            before = _venv_bin_names(step["venv"])
        if step["kind"] == "npm" and shutil.which("npm") is None:
            raise RunError(f"{ident}: npm is not installed (it comes with Node.js: "
                           "https://nodejs.org, or apt-get install nodejs npm)")
        try:
            proc = subprocess.run(step["argv"], check=False)
        except OSError as exc:
            raise RunError(f"{ident}: could not run {step['print']}: {exc}") from exc
        if proc.returncode != 0:
            raise RunError(f"{ident}: `{step['print']}` failed with status "
                           f"{proc.returncode}")
    return steps


def handle_install(args: argparse.Namespace) -> int:
    from a2c.runtime.run.scaffold import check_command, install_steps, typed
    if bool(args.agent) == bool(args.all):
        raise RunError("usage: a2c agents install ID [ID ...] [--dry-run] (or --all)")
    agents = [a for a in load_agents() if install_steps(a)] if args.all \
        else [load_one(ref) for ref in args.agent]
    several = args.all or len(agents) > 1   # go on past a failure, then name every one
    prefix = Path(args.prefix).resolve() if args.prefix else default_prefix()
    failed = []
    for agent in map(typed, agents):
        command = check_command(agent) if agent.type == "cli" else None
        found = shutil.which(command, path=_search_path(prefix)) if command else None
        if args.missing and found:
            print(f"{agent.id}: `{command}` is {found} (already installed)")
            continue
        print(f"{agent.id}:")
        try:
            install(agent, prefix, args.dry_run)
        except RunError as exc:
            if not several:
                raise
            print(f"error: {exc}", file=sys.stderr)
            failed.append(agent.id)
            continue
        if command and not args.dry_run:
            where = shutil.which(command, path=_search_path(prefix))
            print(f"{agent.id}: `{command}` is {where}" if where else
                  f"{agent.id}: note: `{command}` is not on the sandbox's PATH "
                  f"({_search_path(prefix)}); a2c run will say so before it starts")
    if failed:
        raise RunError(f"not installed: {', '.join(failed)}")
    return 0
