"""`a2c doctor [--json]`: one table of what this machine can do, each row with the command that
fixes it (the checks: runtime/preflight/). `a2c run` and `a2c sweep` run the same checks as
their pre-flight (`preflight`): a row that is not ok is one line before anything is written.

Each row is `required` (the demo's path: the sandbox, the training stack, the built-in SmolLM2
prepared or preparable, the record key, disk, cores and memory) or `optional` (GPUs, docker,
node, the LLM scaffolds, Ray, ...). Exit status:

- 0: ready for the demo, and no optional row is missing (every row ok; a required row may be
  `warn`: it works as it is, e.g. a model prepared on first use);
- 3: ready for the demo, but optional rows are not ok (`missing` or `warn`), listed last;
- 1: the demo cannot run here: a required row is `missing`.

(2 stays what it is for every a2c command: a usage error.) `--json` prints one object: `checks`
(each row with `required`), `ready_for_demo`, `required_missing`, `optional_missing`, `exit`
and `ok` (exit 0).

Output reads the same on a terminal and off it: one block per row, `status  need  check: found`
then an indented `fix:` line. Off a terminal (a pipe, a log) nothing is wrapped, so a path is
never broken across lines; on a terminal lines wrap at spaces only.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from a2c.runtime.preflight import Verdict

STYLE = {"ok": "green", "warn": "yellow", "missing": "bold red"}
EXIT_HELP = ("exit status: 0 ready for the demo and nothing optional missing; 3 ready for the "
             "demo, optional parts missing (listed); 1 the demo cannot run here (a required row "
             "is missing)")
STATUS_W, NEED_W = 9, 10     # "missing  ", "required  "


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "doctor", help="what this machine can do (sandbox, training stack, disk, models, GPUs, "
                       "docker, node, scaffolds, record key, Ray), each with its fix; "
                       + EXIT_HELP,
        description="Checks what the demo needs (required rows: bubblewrap, the training "
                    "stack, cores and memory, free disk, the built-in SmolLM2, the record key) "
                    "and the optional parts (the cgroup limits, GPUs and their driver, the "
                    "Docker engine and its NVIDIA runtime, node and npm, each LLM scaffold, Ray, "
                    "unread A2C_* variables). Nothing is installed or changed. E" + EXIT_HELP[1:]
                    + ".")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs-dir", metavar="DIR", help="where runs go, for the disk row (default: ./runs, "
                                           "as a2c run)")
    parser.set_defaults(handler=handle_doctor)


def checks(runs_dir: str | None = None) -> list:
    from a2c.cli.bundles import load_agents
    from a2c.runtime import preflight
    from a2c.runtime.scaffold_tools import search_path
    return preflight.all_checks(load_agents(), search_path(),
                                runs_dir=Path(runs_dir) if runs_dir else None)


def block(row, width: int | None = None) -> list[str]:
    """One row as lines: `status  need  name: detail`, then `fix: ...` indented. With `width`,
    wrapped at spaces only (a path is never split); without, one line each."""
    head = f"{row.status:<{STATUS_W}}{'required' if row.required else 'optional':<{NEED_W}}"
    indent = " " * len(head)
    texts = [(head, f"{row.name}: {row.detail}")]
    if row.fix:
        texts.append((indent, f"fix: {row.fix}"))
    if not width:
        return [first + text for first, text in texts]
    out = []
    for first, text in texts:
        out += textwrap.wrap(text, width=max(width, len(indent) + 20), initial_indent=first,
                             subsequent_indent=indent + "  ", break_long_words=False,
                             break_on_hyphens=False)
    return out


def summary(result: Verdict, rows: list) -> str:
    optional = (f"optional, not ready: {', '.join(result.optional_missing)}"
                if result.optional_missing else "")
    if not result.ready_for_demo:
        return (f"NOT ready for the demo: missing {', '.join(result.required_missing)}"
                + (f"; {optional}" if optional else "") + f" (exit {result.exit})")
    if optional:
        return f"ready for the demo (a2c demo); {optional} (exit {result.exit})"
    return f"ready for the demo (a2c demo), and every optional row ok: {len(rows)} rows (exit 0)"


def handle_doctor(args: argparse.Namespace) -> int:
    from a2c.runtime.preflight import Verdict
    rows = checks(getattr(args, "runs_dir", None))
    result = Verdict.of(rows)
    if args.json:
        print(json.dumps({"checks": [row.as_dict() for row in rows], **result.as_dict()},
                         indent=2))
        return result.exit
    from rich.console import Console
    from rich.text import Text
    console = Console(highlight=False, soft_wrap=True)   # soft_wrap: rich never wraps itself
    width = console.width if console.is_terminal else None

    def say(line: str) -> None:
        for part in textwrap.wrap(line, width, break_long_words=False,
                                  break_on_hyphens=False) if width else [line]:
            console.print(Text(part, style="bold"))
    say("a2c doctor: what this machine can do (required: the demo needs it; optional: other "
        "tasks, backends and scaffolds)")
    for row in rows:
        for i, line in enumerate(block(row, width)):
            text = Text(line)
            if i == 0:
                text.stylize(STYLE[row.status], 0, len(row.status))
            console.print(text)
    say(summary(result, rows))
    return result.exit


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
