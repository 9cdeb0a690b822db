"""`a2c validate | build | list | schema | new` — the compiler's commands.

Handlers return an exit code; spec problems are raised as SpecError (exit 2, one line per problem,
no traceback). Heavy libraries are never imported here.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from a2c.contracts.bundle import KINDS
from a2c.errors import A2CError, SpecError


def register(subparsers) -> None:
    p = subparsers.add_parser("validate", help="validate task, agent and suite specs",
                              description="Validate specs (files or ids). Prints every problem "
                                          "as file:line:col: field.path: what is wrong; exit 2 "
                                          "when any spec is invalid.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="spec files or ids, or driver "
                                                            "scripts (default: all specs under "
                                                            "specs/)")
    p.add_argument("--all", action="store_true", help="every spec under specs/ and every "
                                                      "driver script under specs/drivers/ "
                                                      "(the default without PATH)")
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
    p.add_argument("--answer", choices=["number", "string", "choice", "code"],
                   help="level 1: the answer style the template grades (default number: "
                        "'#### N'; string: 'Answer: <text>'; choice: 'Answer: <A-D>'; code: "
                        "a function body run against tests, as HumanEval)")
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


DRIVER_SCRIPT_KIND = "DriverScript"
_DRIVER_KIND_LINE = re.compile(rf"^kind:\s*['\"]?{DRIVER_SCRIPT_KIND}['\"]?\s*(#.*)?$", re.M)


def _is_driver_script(path) -> bool:
    """A scripted driver's recipe (specs/drivers/*.yaml, `kind: DriverScript`): not a spec the
    compiler builds, but a file `a2c validate` checks against its own schema."""
    path = Path(path)
    try:
        if not path.is_file():
            return False
        head = path.read_bytes()[:65536].decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return False
    return path.parent.name == "drivers" or bool(_DRIVER_KIND_LINE.search(head))


def _driver_scripts() -> list[Path]:
    from a2c.compiler.load import specs_root
    folder = specs_root() / "drivers"
    return sorted(p for p in folder.glob("*.y*ml") if p.is_file()) if folder.is_dir() else []


def _check_driver_script(path: Path) -> tuple[str | None, list[str]]:
    """(its id, []) or (None, every problem) — checked by the same reader a run uses
    (a2c.agents.scripted_driver.script, against compiler/schemas/driver-script.schema.json)."""
    from a2c.agents.scripted_driver.script import ScriptError, load
    try:
        return load(path).id, []
    except ScriptError as exc:
        return None, [line for line in str(exc).splitlines() if line.strip()]


def cmd_validate(args) -> int:
    from a2c.compiler.build import load_all
    everything = args.all or not args.paths
    paths = _paths(args)
    scripts = _driver_scripts() if everything else []
    if not everything:
        scripts = [Path(p) for p in paths if _is_driver_script(p)]
        paths = [p for p in paths if not _is_driver_script(p)]
    problems, checked = [], []
    for script in scripts:
        script_id, found = _check_driver_script(script)
        problems.extend(found)
        if script_id is not None:
            checked.append((script_id, script))
    try:
        docs = load_all(paths) if paths else []
    except SpecError as exc:
        raise SpecError([*exc.problems, *problems]) from None
    if problems:
        raise SpecError(problems)
    for doc in docs:
        print(f"ok  {doc.kind.lower():5}  {doc.id:<16} {doc.path}")
    for script_id, script in checked:
        print(f"ok  {'driver':5}  {script_id:<16} {script}")
    return 0


def cmd_build(args) -> int:
    from a2c.compiler import build
    if not args.paths and not args.all:
        raise A2CError("name specs to build, or use --all")
    out = Path(args.out) if args.out else build.default_out_dir()
    artifacts = build.plan(_paths(args))
    if args.check:
        stale = build.stale_files(artifacts, out, only_theirs=not args.all)
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
    from a2c.compiler.listing import list_specs
    found = list_specs(args.specs)
    if args.json:
        print(json.dumps(found.to_dict(), indent=2, sort_keys=True))
    else:
        from rich.console import Console

        from a2c.cli.tables import listing
        console = Console()
        console.print(listing("Tasks", ["id", "level", "grader", "base model", "budget", "title"], [
            [t.id, str(t.level), t.grader, str(t.base_model),
             f"{t.wall_clock}, {t.gpus} GPU, {t.max_submissions} subm.", t.title]
            for t in found.tasks], ids=("id", "grader")))
        console.print(listing("Agents", ["id", "type", "default driver", "transcript", "title"], [
            [a.id, a.type, str(a.driver or "-"), a.transcript, a.title]
            for a in found.agents], ids=("id",)))
    if found.problems:
        print("\n".join(found.problems), file=sys.stderr)
        return 2
    return 0


def cmd_schema(args) -> int:
    from a2c.compiler.schema import load_schema
    print(json.dumps(load_schema(args.kind), indent=2))
    return 0


def cmd_new(args) -> int:
    from a2c.compiler.scaffold import new_task
    spec = new_task(args.id, title=args.title, level=args.level,
                    specs_dir=Path(args.specs) if args.specs else None, answer=args.answer)
    print(f"created {spec} and {spec.with_suffix('.md')}")
    if not args.no_build:
        from a2c.compiler.build import build_specs
        # A specs folder of one's own builds beside it (DIR/../generated), as specs/ and
        # generated/ sit side by side here: never into this project's generated/.
        out = args.out or (Path(args.specs).resolve().parent / "generated" if args.specs else None)
        for path in build_specs([spec], out):
            print(f"built {path}")
    return 0
