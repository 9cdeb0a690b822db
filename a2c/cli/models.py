"""`a2c models list` and `a2c models prepare NAME [--force]`.

Only `a2c.runtime.models` is imported here (it imports torch/transformers lazily, inside the
builders), so registering these parsers costs nothing.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from a2c.runtime.models import BUILTINS


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "models", help="list and prepare the built-in base models (cached, offline)",
        description="Built-in base models are built or converted once and cached under "
                    "$A2C_CACHE/models (default ~/.cache/a2c/models).")
    sub = parser.add_subparsers(dest="models_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])

    p_list = sub.add_parser("list", help="built-in models and whether they are prepared")
    p_list.add_argument("--json", action="store_true", help="print one JSON object")
    p_list.set_defaults(handler=_list)

    p_prep = sub.add_parser("prepare", help="build/convert a built-in model into the cache; "
                                            "prints its path and fingerprint")
    p_prep.add_argument("name", metavar="NAME",
                        help=f"built-in model name: {', '.join(sorted(BUILTINS))}")
    p_prep.add_argument("--force", action="store_true", help="rebuild even if cached")
    p_prep.add_argument("--seed", type=int, default=0, help="seed (seeded built-ins: tiny)")
    p_prep.add_argument("--json", action="store_true", help="print one JSON object")
    p_prep.set_defaults(handler=_prepare)


def _list(args: argparse.Namespace) -> int:
    from a2c.runtime.model_list import list_models
    rows = list_models()
    if args.json:
        print(json.dumps({"models": [asdict(row) for row in rows]}, indent=2, sort_keys=True))
        return 0
    width = max(len(row.name) for row in rows)
    for row in rows:
        state = "prepared" if row.prepared else "not prepared"
        print(f"{row.name:<{width}}  {state:<12}  {row.description}")
        if row.prepared:
            print(f"{'':<{width}}  {row.path}")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from a2c.runtime.models import model_fingerprint, prepare_builtin
    path = prepare_builtin(args.name, seed=args.seed, force=args.force)
    fingerprint = model_fingerprint(path)
    if args.json:
        print(json.dumps({"name": args.name, "path": str(path), "fingerprint": fingerprint}))
    else:
        print(f"path: {path}")
        print(f"fingerprint: {fingerprint}")
    return 0
