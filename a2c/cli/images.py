"""`a2c images base|build|list`: the docker backend's images, made once and reused.

    a2c images base [TASK ...]            the offline base for each task's pinned requirements
    a2c images build TASK [--agent ID]    the task image (and the agent layer), as a run makes it
    a2c images list                       every a2c image the engine holds

TASK and ID are bundle folders or ids built under generated/ (as for `a2c run`). Only the
runtime's docker modules are imported, and only when a command runs.
"""

from __future__ import annotations

import argparse
import json
import time


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "images", help="the docker backend's images: offline base, task and agent images",
        description="Images for --backend docker, keyed by what went into them and reused. "
                    "Where a bundle's pinned base cannot be pulled, a base is made offline from "
                    "Debian's packages (mmdebstrap) with the bundle's pinned requirements.")
    sub = parser.add_subparsers(dest="images_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])

    p_base = sub.add_parser("base", help="make the offline base image for tasks' requirements")
    p_base.add_argument("tasks", nargs="*", default=["arith"], metavar="TASK",
                        help="task bundles or ids (default: arith)")
    p_base.add_argument("--json", action="store_true", help="print one JSON object per task")
    p_base.set_defaults(handler=_base)

    p_build = sub.add_parser("build", help="build a task's image (and an agent's layer)")
    p_build.add_argument("task", metavar="TASK", help="task bundle or id")
    p_build.add_argument("--agent", metavar="ID", help="agent bundle or id (adds its layer)")
    p_build.add_argument("--json", action="store_true", help="print one JSON object")
    p_build.set_defaults(handler=_build)

    p_list = sub.add_parser("list", help="the a2c images the engine holds")
    p_list.add_argument("--json", action="store_true", help="print one JSON object")
    p_list.set_defaults(handler=_list)


def _client():
    from a2c.runtime.sandbox.docker_engine import client
    return client()


def _show(args, built, what: str) -> None:
    if args.json:
        print(json.dumps({"what": what, **built.__dict__}, sort_keys=True))
        return
    verb = "built" if built.built else "present"
    steps = ", ".join(f"{k} {v}" for k, v in sorted(built.steps.items()))
    print(f"{what}: {built.tag} {verb} in {built.seconds:.1f} s" + (f" ({steps})" if steps else ""))


def _base(args: argparse.Namespace) -> int:
    from a2c.runtime.run.resolve import resolve_task_bundle
    from a2c.runtime.sandbox.docker_images import make_base, requirements
    client = _client()
    for ref in args.tasks:
        bundle = resolve_task_bundle(ref)
        _show(args, make_base(client, requirements(bundle), report=print), f"base for {ref}")
    return 0


def _build(args: argparse.Namespace) -> int:
    from a2c.runtime.run.resolve import resolve_agent_bundle, resolve_task_bundle
    from a2c.runtime.sandbox.docker_agent_layer import ensure_run_image
    from a2c.runtime.sandbox.docker_images import ensure_task_image
    client = _client()
    bundle = resolve_task_bundle(args.task)
    start = time.monotonic()
    if args.agent:
        built = ensure_run_image(client, bundle, resolve_agent_bundle(args.agent), report=print)
    else:
        built = ensure_task_image(client, bundle, report=print)
    built.seconds = time.monotonic() - start
    _show(args, built, "image")
    return 0


def _list(args: argparse.Namespace) -> int:
    from a2c.runtime.sandbox.docker_images import list_images
    rows = list_images(_client())
    if args.json:
        print(json.dumps({"images": rows}, indent=2, sort_keys=True))
        return 0
    if not rows:
        print("no a2c images (a2c images base; a2c images build TASK --agent ID)")
    for row in rows:
        print(f"{row['tag']:<72} {row['size_mb']:>9.1f} MB  {row['created']}")
    return 0
