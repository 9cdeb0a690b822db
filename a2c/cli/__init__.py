"""The `a2c` command line: one package, a module per group of subcommands (see `main`)."""

from a2c.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
