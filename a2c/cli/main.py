"""The `a2c` command line.

Each module of this package registers one group of subcommands (`register(subparsers)`) and takes
its choices (modes, backends, kinds, formats) from the modules that own them. This package is the
one place that uses both the compiler and the runtime (e.g. `a2c run SPEC` compiles first), so
they never import each other. Heavy libraries (torch, transformers) are imported inside command
handlers, never at module level, so `a2c validate` stays fast on the light install.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings

from a2c import __version__
from a2c.errors import A2CError, SpecDeprecationWarning

# Order is the order of `a2c --help`.
COMMAND_MODULES = (
    "a2c.cli.compile",   # validate, build, list, schema, new
    "a2c.cli.run",       # run, demo
    "a2c.cli.agents",    # agents list, agents install
    "a2c.cli.eval",      # eval
    "a2c.cli.check",     # check
    "a2c.cli.models",    # models
    "a2c.cli.images",    # images (the docker backend)
    "a2c.cli.data",      # data
    "a2c.cli.analysis",  # verify, report, leaderboard
    "a2c.cli.export",    # export --public
    "a2c.cli.review",    # review
    "a2c.cli.sweep",     # sweep
    "a2c.cli.view",      # view
    "a2c.cli.doctor",    # doctor
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="a2c",
        description="Compile and run agentic RL post-training benchmarks.",
    )
    parser.add_argument("--version", action="version", version=f"a2c {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def _one_line(command: str, show):
    """A spec's deprecation as `a2c CMD: warning: file:line:col: path: ...`; others as before."""
    def shown(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SpecDeprecationWarning):
            print(f"a2c {command}: warning: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)
    return shown


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line(args.command, warnings.showwarning)
            return int(handler(args) or 0)
    except A2CError as exc:
        print(f"a2c {args.command}: error: {exc}" if "\n" not in str(exc) else str(exc),
              file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
