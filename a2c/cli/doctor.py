"""`a2c doctor [--json]`: one table of what this machine can do, each row with the command that
fixes it (the checks: runtime/preflight.py). `a2c run` and `a2c sweep` run the same checks as
their pre-flight (`preflight`): a row that is not ok is one line before anything is written.

Exit status: 0 when no row is `missing`, 1 otherwise (a `warn` row is something this machine
runs without: no GPU, a model prepared on first use).
"""

from __future__ import annotations

import argparse
import json

STYLE = {"ok": "green", "warn": "yellow", "missing": "bold red"}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "doctor", help="what this machine can do (sandbox, limits, GPUs, docker, scaffolds, "
                       "models, record key, Ray), each with its fix",
        description="Checks bubblewrap (as root and unprivileged), the cgroup version and the "
                    "limits it can enforce, GPUs and their driver, the Docker engine and its "
                    "NVIDIA runtime, each scaffold, the built-in models, the operator's record "
                    "key and Ray. Nothing is installed or changed.")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=handle_doctor)


def checks() -> list:
    from a2c.cli.agents import _search_path, load_agents
    from a2c.runtime import preflight
    return preflight.all_checks(load_agents(), _search_path())


def handle_doctor(args: argparse.Namespace) -> int:
    rows = checks()
    missing = [row for row in rows if row.status == "missing"]
    if args.json:
        print(json.dumps({"checks": [row.as_dict() for row in rows], "ok": not missing},
                         indent=2))
        return 1 if missing else 0
    from rich.console import Console
    from rich.table import Table
    table = Table(title="a2c doctor: what this machine can do")
    for column in ("check", "status", "found", "fix"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row.name, f"[{STYLE[row.status]}]{row.status}[/]", row.detail,
                      row.fix or "")
    console = Console(highlight=False)
    console.print(table)
    console.print(f"{len(rows) - len(missing)} of {len(rows)} ready" +
                  (f"; missing: {', '.join(row.name for row in missing)}" if missing else ""))
    return 1 if missing else 0


def preflight(rows: list, report, fatal: tuple[str, ...] = ()) -> None:
    """A pre-flight's rows that are not ok, one `pre-flight:` line each through `report`; a
    missing row named in `fatal` stops the command with its fix (exit 2, as a scaffold's
    failed pre-flight)."""
    from a2c.runtime.run.scaffold import PreflightError
    for row in rows:
        if row.status == "missing" and row.name in fatal:
            raise PreflightError(f"pre-flight: {row.line()}")
        if not row.ok:
            report(f"pre-flight: {row.line()}")
