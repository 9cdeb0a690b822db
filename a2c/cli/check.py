"""`a2c check TASK [--agent ID] [--budget D]`: the author's gate, before a task is committed.

The command compiles the task spec as it is now (and the agent, with --agent: the compiler is
called here, in the CLI layer) and hands the bundle to `a2c.runtime.check`, which proves it with
the real grader, one numbered point per line (what each point checks: runtime/check/).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from a2c.errors import A2CError
from a2c.runtime.check import DEFAULT_BUDGET


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check", help="prove a task: gold answers score 100, empty ones 0, splits disjoint, "
                      "baseline, and (--agent) a reference agent's gain",
        description="The author's gate: compile the task, score its gold answers in the answer "
                    "format (100) and empty/corrupted answers (0) with the real grader, check "
                    "the splits are disjoint, score the baseline, and with --agent run a "
                    "reference agent under a short budget and print its gain with an interval "
                    "and, when it is missing or small, its likely cause.")
    p.add_argument("task", help="a task spec file, a task id, or a bundle folder")
    p.add_argument("--agent", help="also run this (reference) agent, e.g. ref-sft")
    p.add_argument("--budget", default=DEFAULT_BUDGET,
                   help=f"the agent's wall clock with --agent (default {DEFAULT_BUDGET})")
    p.add_argument("--agent-param", action="append", default=[], metavar="NAME=VALUE",
                   help="with --agent: set one of the agent's params (its spec's `params:`, "
                        "as `a2c run --agent-param`); repeatable")
    p.add_argument("--runs-dir", help="where the agent's run goes (default: .a2c/check-runs/ "
                                      "of the project, kept; never runs/, so the check's run "
                                      "is on no leaderboard)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-baseline", action="store_true",
                   help="skip point (4) (and so (5)): the quick data and grader check only")
    p.set_defaults(handler=run)


def compile_task(ref: str, work: Path):
    """The bundle of TASK: a bundle folder as is; a spec (file or id) compiled into `work`, so the
    check always sees the spec as it is now, not a stale generated/ copy."""
    from a2c.contracts.bundle import Bundle, is_bundle

    path = Path(ref)
    if is_bundle(path):
        return Bundle.load(path)
    from a2c.compiler.build import build_specs
    from a2c.compiler.load import find_spec
    from a2c.errors import SpecError

    try:
        spec = find_spec(ref, kind="Task")
    except SpecError:
        from a2c.paths import project_root
        generated = project_root() / "generated" / ref
        if "/" not in ref and is_bundle(generated):
            return Bundle.load(generated)
        raise
    for folder in build_specs([spec], work):
        if is_bundle(folder):
            return Bundle.load(folder)
    raise A2CError(f"{ref}: compiled, but it is not a task spec")


def compile_agent(args: argparse.Namespace, work: Path):
    """The agent of point (5) compiled, its --agent-param values checked against its
    declarations: a typo costs a second (exit 2), not the minutes of points (1)-(4)."""
    from a2c.cli.run import compile_if_needed
    from a2c.contracts.agent_params import effective, parse_assignments
    from a2c.runtime.check import AgentCheck
    from a2c.runtime.run.resolve import load_agent, resolve_agent_bundle
    agent = compile_if_needed(args.agent, "Agent", work)
    params = parse_assignments(args.agent_param)
    effective(load_agent(resolve_agent_bundle(agent)), params)
    return AgentCheck(agent=agent, budget=args.budget, agent_params=params,
                      runs_dir=Path(args.runs_dir) if args.runs_dir else None, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    from a2c.durations import parse_duration
    from a2c.errors import SpecError
    from a2c.runtime.check import EXIT_FAILED, Report, check_bundle

    parse_duration(args.budget)        # a bad --budget is refused now (exit 2), not at point (5)
    if args.agent_param and not args.agent:
        raise SpecError("--agent-param sets the params of the agent of point (5): give --agent")
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="a2c-check-"))
    report = Report()
    try:
        try:
            bundle = compile_task(args.task, work / "bundle")
        except SpecError as exc:
            for problem in exc.problems:
                print(f"FAIL (compile) {problem}", flush=True)
            print(f"a2c check {args.task}: the spec does not compile; fix the lines above",
                  flush=True)
            return EXIT_FAILED
        agent = compile_agent(args, work / "agent") if args.agent else None
        check_bundle(report, bundle, work, agent=agent, no_baseline=args.no_baseline)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report.finish(args.task, time.monotonic() - started)
