"""`a2c validate | build | list | schema | new` — the compiler's commands.

Handlers return an exit code; spec problems are raised as SpecError (exit 2, one line per problem,
no traceback). Heavy libraries are never imported here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from a2c.contracts.bundle import KINDS
from a2c.errors import A2CError, SpecError


def register(subparsers) -> None:
    p = subparsers.add_parser("validate", help="validate task, agent and suite specs",
                              description="Validate specs (files or ids). Prints every problem "
                                          "as file:line:col: field.path: what is wrong; exit 2 "
                                          "when any spec is invalid.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="spec files or ids (default: all "
                                                            "specs under specs/)")
    p.set_defaults(handler=cmd_validate)

    p = subparsers.add_parser("build", help="compile specs into bundles under generated/",
                              description="Compile specs into bundles. Nothing is written when "
                                          "any spec is invalid; each bundle is swapped in "
                                          "atomically.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="spec files or ids")
    p.add_argument("--all", action="store_true", help="every spec under specs/ (and remove "
                                                      "bundles no spec produces any more)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 and name the "
                                                        "stale files if the output differs")
    p.add_argument("-o", "--out", metavar="DIR", help="output directory (default: generated/)")
    p.set_defaults(handler=cmd_build)

    p = subparsers.add_parser("list", help="list the tasks and agents under specs/")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--specs", metavar="DIR", help="specs directory (default: specs/)")
    p.set_defaults(handler=cmd_list)

    p = subparsers.add_parser("schema", help="print the JSON Schema of a spec kind")
    p.add_argument("kind", nargs="?", default="task", choices=[kind.lower() for kind in KINDS])
    p.set_defaults(handler=cmd_schema)

    p = subparsers.add_parser("new", help="create a new spec from a template")
    p.add_argument("what", choices=["task"], help="what to create")
    p.add_argument("id", help="the new task's id (lowercase letters, digits, '-', '_')")
    p.add_argument("--title", help="one-line title")
    p.add_argument("--level", type=int, choices=[1, 2], default=1,
                   help="1 (exact match, default) or 2 (judge)")
    p.add_argument("--specs", metavar="DIR", help="specs directory (default: specs/)")
    p.add_argument("--no-build", action="store_true", help="do not build the bundle")
    p.add_argument("-o", "--out", metavar="DIR", help="bundle output directory")
    p.set_defaults(handler=cmd_new)


def _paths(args) -> list:
    from a2c.compiler.load import discover
    if getattr(args, "all", False) or not args.paths:
        found = discover()
        if not found:
            raise A2CError("no specs found under specs/")
        return found
    paths = []
    for given in args.paths:
        folder = Path(given)
        if folder.is_dir():     # a specs/ folder, or a folder of spec files
            found = discover(folder) or sorted(folder.glob("*.y*ml"))
            if not found:
                raise A2CError(f"{folder}: no spec files in this folder")
            paths.extend(found)
        else:
            paths.append(given)
    return paths


def cmd_validate(args) -> int:
    from a2c.compiler.build import load_all
    docs = load_all(_paths(args))
    for doc in docs:
        print(f"ok  {doc.kind.lower():5}  {doc.data['id']:<16} {doc.path}")
    return 0


def cmd_build(args) -> int:
    from a2c.compiler import build
    if not args.paths and not args.all:
        raise A2CError("name specs to build, or use --all")
    out = Path(args.out) if args.out else build.default_out_dir()
    artifacts = build.plan(_paths(args))
    if args.check:
        if args.all:
            stale = build.stale_files(artifacts, out)
        else:
            stale = build.stale_files(artifacts, out)
            wanted = {a.rel_dir for a in artifacts}
            stale = [s for s in stale if any(s.split("/", 1)[1].startswith(w + "/")
                                             for w in wanted)]
        if stale:
            print("\n".join(stale), file=sys.stderr)
            print(f"{len(stale)} stale file(s) in {out}: run `a2c build --all`", file=sys.stderr)
            return 1
        print(f"{out}: up to date ({len(artifacts)} bundles)")
        return 0
    for art in artifacts:
        path = build.write_artifact(art, out)
        print(f"built {art.kind.lower():5}  {art.id:<16} {path}")
    if args.all:
        for removed in build.prune(artifacts, out):
            print(f"removed {removed} (no spec produces it)")
    return 0


def cmd_list(args) -> int:
    from a2c.compiler.build import human_duration, load_all
    from a2c.compiler.load import discover
    from a2c.compiler.resolve import resolve
    specs = discover(args.specs)
    rows_t, rows_a = [], []
    problems = []
    for path in specs:
        try:
            doc = load_all([path])[0]
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        r = resolve(doc)
        if doc.kind == "Task":
            bm = r["base_model"]
            model = bm.get("hub") or bm.get("builtin") or bm.get("path")
            b = r["budget"]
            rows_t.append({"id": r["id"], "level": r["level"], "grader": r["grader"]["kind"],
                           "base_model": model, "wall_clock": human_duration(b["wall_clock_s"]),
                           "gpus": b["gpus"], "max_submissions": b["max_submissions"],
                           "title": r["title"]})
        elif doc.kind == "Agent":
            rows_a.append({"id": r["id"], "type": r["type"], "title": r["title"],
                           "driver": r["driver"]["default"],
                           "transcript": r["transcript"]["format"]})
    if args.json:
        print(json.dumps({"tasks": rows_t, "agents": rows_a}, indent=2, sort_keys=True))
    else:
        from rich.console import Console
        from rich.table import Table
        console = Console()
        t = Table(title="Tasks")
        for col in ("id", "level", "grader", "base model", "budget", "title"):
            t.add_column(col)
        for r in rows_t:
            t.add_row(r["id"], str(r["level"]), r["grader"], str(r["base_model"]),
                      f"{r['wall_clock']}, {r['gpus']} GPU, {r['max_submissions']} subm.",
                      r["title"])
        console.print(t)
        a = Table(title="Agents")
        for col in ("id", "type", "default driver", "transcript", "title"):
            a.add_column(col)
        for r in rows_a:
            a.add_row(r["id"], r["type"], str(r["driver"] or "-"), r["transcript"], r["title"])
        console.print(a)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    return 0


def cmd_schema(args) -> int:
    from a2c.compiler.schema import load_schema
    print(json.dumps(load_schema(args.kind), indent=2))
    return 0


def cmd_new(args) -> int:
    from a2c.compiler.scaffold import new_task
    spec = new_task(args.id, title=args.title, level=args.level,
                    specs_dir=Path(args.specs) if args.specs else None)
    print(f"created {spec} and {spec.with_suffix('.md')}")
    if not args.no_build:
        from a2c.compiler.build import build_specs
        # A specs folder of one's own builds beside it (DIR/../generated), as specs/ and
        # generated/ sit side by side here: never into this project's generated/.
        out = args.out or (Path(args.specs).resolve().parent / "generated" if args.specs else None)
        for path in build_specs([spec], out):
            print(f"built {path}")
    return 0
