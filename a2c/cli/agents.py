"""`a2c agents list`, `a2c agents params ID` and `a2c agents install ID|--all [--dry-run]
[--reinstall] [--prefix DIR]`.

The agents are the compiled agent bundles (generated/agents/<id>/agent.json; an id with no bundle
is compiled from its spec first, as `a2c run` does). `install` puts a scaffold's pinned npm or
pip packages into a2c's own tool prefix (runtime/scaffold_tools.py: per pin, atomic, never the
machine's global npm), where the local backend's sandbox sees them, and prints one line per
agent; install `commands:` (OpenHands' uv) run as written with `bash -c`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from a2c.cli.bundles import load_agents
from a2c.contracts.agent_params import ParamDeclaration
from a2c.contracts.spec import AgentSpec
from a2c.errors import RunError


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
                        help="an agent whose install is a shell command (not npm or pip) is "
                             "skipped when its command is found; npm and pip scaffolds are "
                             "always skipped when their exact pin is installed whole")
    p_inst.add_argument("--reinstall", action="store_true",
                        help="install again even where the exact pin is installed whole")
    p_inst.add_argument("-v", "--verbose", action="store_true",
                        help="print every command as it starts (the output stays in the log)")
    p_inst.add_argument("--prefix", help="a2c's tool prefix: PREFIX/lib/a2c-tools/<id>-<pin>, "
                                         "commands linked into PREFIX/bin; default: a2c's "
                                         "virtual environment, else /usr/local")
    p_inst.set_defaults(handler=handle_install)


# ----------------------------------------------------------------------------- bundles
def load_one(ref: str) -> AgentSpec:
    """The resolved spec of agent `ref`: its bundle, compiled from its spec when none is built."""
    import tempfile

    from a2c.cli.run import compile_if_needed
    from a2c.contracts.bundle import load_bundle
    work = Path(tempfile.mkdtemp(prefix="a2c-agents-"))
    try:
        folder = compile_if_needed(ref, "Agent", work)
        from a2c.runtime.run.resolve import resolve_agent_bundle
        bundle = load_bundle(resolve_agent_bundle(folder), kind="Agent", verify=False)
        return bundle.agent
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- list
def handle_list(args: argparse.Namespace) -> int:
    from a2c.runtime.scaffold_tools import AgentRow
    rows = [AgentRow.of(agent) for agent in load_agents()]
    if args.json:
        import json
        print(json.dumps({"agents": [row.to_dict() for row in rows]}, indent=2))
        return 0
    from rich.console import Console

    from a2c.cli.tables import listing
    cells = []
    for row in rows:
        found = "" if not row.command else (" (found)" if row.found else " (not found)")
        cells.append([row.id, str(row.type), row.driver or "—", (row.command or "—") + found,
                      "\n".join(row.install) or "—"])
    Console(highlight=False).print(listing("agents (generated/agents)", [
        "id", "type", "driver", "command", "install"], cells, ids=("id", "driver")))
    return 0


# ----------------------------------------------------------------------------- params
def _bounds(decl: ParamDeclaration) -> str:
    parts = []
    if decl.minimum is not None:
        parts.append(f">= {decl.minimum}")
    if decl.maximum is not None:
        parts.append(f"<= {decl.maximum}")
    if decl.enum:
        parts.append("one of " + ", ".join(map(str, decl.enum)))
    return "; ".join(parts) or "—"


def handle_params(args: argparse.Namespace) -> int:
    """What `--agent-param` accepts for one agent, from its resolved spec (so from the bundle a
    run would use)."""
    from a2c.contracts.agent_params import declared
    agent = load_one(args.agent)
    if args.json:
        import json
        print(json.dumps({"agent": agent.id, "params": dict(agent.params or {})}, indent=2))
        return 0
    params = declared(agent.params)
    if not params:
        print(f"{agent.id} declares no params")
        return 0
    from rich.console import Console

    from a2c.cli.tables import listing
    cells = [[name, str(decl.type), json_value(decl.default), _bounds(decl),
              str(decl.description or "")] for name, decl in params.items()]
    Console(highlight=False).print(listing(
        f"{agent.id} params (a2c run --agent-param NAME=VALUE)",
        ["name", "type", "default", "bounds", "description"], cells, ids=("name",)))
    return 0


def json_value(value) -> str:
    """A default as the user would type it back (true, 0.0001, "text")."""
    import json
    return value if isinstance(value, str) else json.dumps(value)


# ----------------------------------------------------------------------------- install
def handle_install(args: argparse.Namespace) -> int:
    """One line per agent: installed, present, failed (the failing command's last lines first,
    then its log) or nothing to install. Exit 1 when any failed, after trying every one."""
    from a2c.runtime import scaffold_tools
    from a2c.runtime.run.scaffold import check_command, install_steps
    if bool(args.agent) == bool(args.all):
        raise RunError("usage: a2c agents install ID [ID ...] [--dry-run] (or --all)")
    agents = [a for a in load_agents() if install_steps(a)] if args.all \
        else [load_one(ref) for ref in args.agent]
    prefix = Path(args.prefix).resolve() if args.prefix else scaffold_tools.default_prefix()
    width = max(len(a.id) for a in agents) if agents else 0
    failed = []
    for agent in agents:
        if args.dry_run:
            print(f"{agent.id}:")
            for line in scaffold_tools.install_plan(agent, prefix):
                print(f"  would run: {line}")
            continue
        command = check_command(agent) if agent.type == "cli" else None
        runs_commands = any(s["kind"] == "command" for s in install_steps(agent))
        if runs_commands and args.missing and command and \
                scaffold_tools.find_command(command, prefix):
            print(f"{agent.id:<{width}}  present    `{command}` is "
                  f"{scaffold_tools.find_command(command, prefix)}")
            continue
        outcome = scaffold_tools.install_agent(agent, prefix, reinstall=args.reinstall,
                                               echo=print if args.verbose else None)
        seconds = f" ({outcome.seconds:.0f} s)" if outcome.status == "installed" else ""
        print(f"{agent.id:<{width}}  {outcome.status:<9}  {outcome.detail}{seconds}",
              flush=True)
        if outcome.error is not None:
            for line in outcome.error.tail:
                print(f"{'':<{width}}  | {line[:240]}")
            if outcome.error.log:
                print(f"{'':<{width}}  full log: {outcome.error.log}")
            failed.append(agent.id)
            continue
        if command and outcome.status != "nothing" and \
                not scaffold_tools.find_command(command, prefix):
            print(f"{'':<{width}}  note: `{command}` is not on the sandbox's PATH "
                  f"({scaffold_tools.search_path(prefix)}); a2c run will say so before it starts")
    if failed:
        print(f"not installed: {', '.join(failed)} (their tests skip; a2c run refuses them "
              "before it starts)", file=sys.stderr)
        return 1
    return 0
