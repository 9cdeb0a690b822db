"""`a2c sweep SUITE`: every trial of a suite as one Ray task running `a2c run`, resumable.

This module is the glue the dependency rule wants in the CLI layer: it compiles the suite (and the
tasks and agents it names) with the compiler, hands the trials to `a2c.sweep` (which imports the
contracts only, and Ray), verifies records and writes the leaderboard with the analysis.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, cast

from a2c.contracts.spec import SuiteSpec
from a2c.errors import A2CError

LEADERBOARD_NAME = "leaderboard"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="run a suite's trials on Ray (local by default; --address for a cluster)",
        description="Expand a suite into trials and run each as one Ray task executing `a2c run` "
                    "(a placement group per trial: the agent's CPUs and GPUs, and the grader's "
                    "evaluation device held apart). A trial whose run directory holds an ended, "
                    "verified record is skipped; one that died is resumed (`a2c run --resume`). "
                    "At the end: sweep.json and the leaderboard (Markdown, CSV, HTML) in "
                    "--runs-dir. Needs Ray: pip install 'a2c[sweep]'.")
    p.add_argument("suite", metavar="SUITE", help="a suite id, spec file or suite bundle folder")
    p.add_argument("--address", help="join an existing Ray cluster (e.g. ray://head:10001, or "
                                     "auto); default: start a local instance on loopback")
    p.add_argument("--max-concurrent", type=int, default=1, metavar="N",
                   help="trials in flight at once (default 1; Ray still waits for resources)")
    p.add_argument("--runs-dir", help="where trial run directories, sweep.json and the "
                                      "leaderboard go (default: ./runs/<suite id>); on a cluster, "
                                      "a folder every node shares")
    p.add_argument("--dry-run", action="store_true",
                   help="print the trials and the resources each asks for, and which no node "
                        "could ever fit; run nothing")
    p.add_argument("--assume-cluster", metavar="NxCxG",
                   help="with --dry-run: plan for N nodes of C CPUs and G GPUs (e.g. 4x64x8) "
                        "instead of the cluster at hand")
    p.add_argument("--num-cpus", type=float, help="CPUs of the local Ray instance "
                                                  "(default: this machine's)")
    p.add_argument("--num-gpus", type=int, help="GPUs of the local Ray instance "
                                                "(default: Ray's detection)")
    p.add_argument("--max-resumes", type=int, default=1, metavar="N",
                   help="resumes of a trial whose process died before its run ended (default 1)")
    p.add_argument("--no-bwrap", action="store_true",
                   help="pass --no-bwrap to every a2c run (isolation: none; for debugging)")
    p.set_defaults(handler=handle_sweep)


# ------------------------------------------------------------------------- the suite's bundles

def _load_suite(ref: str) -> tuple[SuiteSpec, str, Any]:
    """(suite body, suite digest, where its task and agent bundles come from).

    A suite bundle folder (generated/suites/<id>) runs the task and agent bundles built beside it,
    which must have the digests its trials were derived from. A suite id or spec is compiled here,
    with its tasks and agents (in memory; `_bundles` writes them)."""
    from a2c.contracts.bundle import MANIFESTS, is_bundle, load_bundle, parse_manifest
    path = Path(ref)
    if is_bundle(path, "Suite"):
        bundle = load_bundle(path, "Suite")
        return cast(SuiteSpec, bundle.spec), bundle.digest, path.resolve().parent.parent
    from a2c.compiler.build import plan
    from a2c.compiler.load import find_spec
    spec = find_spec(ref, kind="Suite")
    (suite_art,) = plan([spec])
    manifest = parse_manifest(suite_art.files[MANIFESTS["Suite"]])
    suite = cast(SuiteSpec, manifest.body)
    root = spec.resolve().parent.parent

    def spec_of(folder: str, ident: str) -> Path:
        yaml = root / folder / f"{ident}.yaml"
        return yaml if yaml.is_file() else yaml.with_suffix(".yml")
    referenced = [spec_of("tasks", t) for t in suite.tasks] + \
        [spec_of("agents", a) for a in suite.agents]
    return suite, manifest.digest, plan(referenced)


def _bundles(suite: SuiteSpec, source: Any, bundles_dir: Path | None
             ) -> tuple[dict[str, Path], dict[str, Path]]:
    """{task: bundle dir}, {agent: bundle dir}. Compiled bundles are written to `bundles_dir` (in
    the runs folder, so every node of a cluster reads the same ones; None for a dry run, which
    writes nothing)."""
    if isinstance(source, Path):
        tasks = {t: source / t for t in suite.tasks}
        agents = {a: source / "agents" / a for a in suite.agents}
        _check_digests(suite, tasks, agents)
        return tasks, agents
    from a2c.compiler.build import write_artifact
    tasks, agents = {}, {}
    for art in source:
        if bundles_dir is not None:
            target = write_artifact(art, bundles_dir).resolve()
        else:
            target = Path(art.rel_dir)
        (tasks if art.kind == "Task" else agents)[art.id] = target
    return tasks, agents


def _check_digests(suite: SuiteSpec, tasks: dict[str, Path], agents: dict[str, Path]) -> None:
    from a2c.contracts.bundle import load_bundle
    from a2c.sweep.plan import suite_trials
    for trial in suite_trials(suite):
        for kind, folder, want in (("Task", tasks[trial.task], trial.task_digest),
                                   ("Agent", agents[trial.agent], trial.agent_digest)):
            have = load_bundle(folder, kind).digest
            if have != want:
                raise A2CError(f"{folder}: its digest is not the one the suite's trials were "
                               "derived from (stale bundles): run `a2c build --all`, or sweep "
                               "the suite id to compile it afresh")


# ------------------------------------------------------------------------- dry run

def _fmt_res(res: dict[str, float]) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in res.items()) or "—"


def dry_run(plans, nodes, cluster_name: str) -> int:
    from rich.console import Console
    from rich.table import Table

    from a2c.durations import format_duration
    from a2c.sweep.plan import estimate_hours, unfit
    console = Console(highlight=False, width=None if Console().is_terminal else 220)
    table = Table(title=f"{len(plans)} trial(s)")
    for col in ("trial", "group", "task", "agent", "driver", "mode", "seed", "wall clock",
                "agent asks", "grader asks"):
        table.add_column(col)
    for p in plans:
        t = p.trial
        table.add_row(t.id, t.group, t.task, t.agent, t.driver or "—", t.mode, str(t.seed),
                      format_duration(t.wall_clock_s or 0),
                      _fmt_res(t.agent_resources), _fmt_res(t.grader_resources))
    console.print(table)
    shape = "; ".join(f"{n.name}: {_fmt_res({k: v for k, v in n.resources.items() if k in ('CPU', 'GPU')})}"
                      for n in nodes[:4]) + (f"; … ({len(nodes)} nodes)" if len(nodes) > 4 else "")
    console.print(f"cluster ({cluster_name}): {shape or 'no nodes'}")
    bad = unfit(plans, nodes)
    if bad:
        console.print(f"[bold red]{len(bad)} trial(s) no node could ever fit[/bold red] (their "
                      "agent and grader bundles must share one node):")
        for p in bad:
            console.print(f"  {p.id}: needs {_fmt_res(_demand(p))}")
    else:
        console.print("every trial fits on some node")
    est = estimate_hours([p for p in plans if p not in bad], nodes)
    if est:
        console.print(f"plan: {est.trials} trials, {est.width} at a time, "
                      f"{est.trial_hours:.4g} trial-hours, {est.gpu_hours:.4g} GPU-hours; "
                      f"at least {est.waves} wave(s) ≈ {est.wall_hours:.3g} h of wall clock")
    return 1 if bad else 0


def _demand(plan) -> dict[str, float]:
    from a2c.sweep.plan import demand
    return demand(plan.trial)


# ------------------------------------------------------------------------- the sweep

def _verifier():
    from a2c.analysis.verify import verify_run

    def verify(run_dir: Path) -> str | None:
        try:
            check = verify_run(run_dir)
        except A2CError as exc:
            return str(exc)
        return None if check.ok else str(check.first)
    return verify


def write_leaderboard(runs_dir: Path, failed: dict[str, str]) -> dict[str, str]:
    """leaderboard.{md,csv,html} over the sweep's runs: mean and spread over the seeds (a group
    is agent × driver × task × mode), failed trials listed as excluded."""
    from a2c.analysis.formats import LEADERBOARD_FORMATS
    from a2c.analysis.leaderboard import build_leaderboard, render_leaderboard
    from a2c.fsutil import write_text_atomic
    board = build_leaderboard(runs_dir, failed=failed)
    paths = {}
    for fmt in LEADERBOARD_FORMATS:
        path = runs_dir / f"{LEADERBOARD_NAME}.{fmt}"
        write_text_atomic(path, render_leaderboard(board, fmt))
        paths[fmt] = str(path)
    return paths


def handle_sweep(args: argparse.Namespace) -> int:
    from a2c.sweep import engine
    from a2c.sweep.plan import assumed_cluster, plan_trials
    if args.max_concurrent < 1:
        raise A2CError("--max-concurrent must be at least 1")
    if args.assume_cluster and not args.dry_run:
        raise A2CError("--assume-cluster plans only: use it with --dry-run")
    if not args.dry_run:               # `a2c doctor`'s Ray row, before anything is written
        from a2c.cli.doctor import preflight
        from a2c.runtime.preflight import sweep_checks
        preflight(sweep_checks(), print, fatal=("Ray",))
    suite, digest, source = _load_suite(args.suite)
    runs_dir = Path(args.runs_dir or Path("runs") / suite.id).resolve()
    tasks, agents = _bundles(suite, source, None if args.dry_run
                             else runs_dir / engine.LOG_DIR / "bundles")
    plans = plan_trials(suite, runs_dir, tasks, agents)
    if args.dry_run:
        if args.assume_cluster:
            return dry_run(plans, assumed_cluster(args.assume_cluster),
                           f"assumed {args.assume_cluster}")
        if args.address:
            ray = engine.connect(args.address)
            return dry_run(plans, engine.cluster_nodes(ray), args.address)
        from a2c.sweep.plan import local_node
        return dry_run(plans, [local_node(args.num_cpus, args.num_gpus)], "this machine")
    return _run(args, suite, digest, plans, runs_dir)


def _run(args, suite: SuiteSpec, digest: str, plans, runs_dir: Path) -> int:
    from contextlib import nullcontext

    from a2c.runtime.run.driver_share import SweepHold
    from a2c.sweep import engine
    from a2c.sweep.plan import SHARED_SERVERS
    from a2c.sweep.progress import SweepProgress
    from a2c.sweep.record import SweepRecord
    runs_dir.mkdir(parents=True, exist_ok=True)
    record = SweepRecord(runs_dir, suite, digest, plans, args.address)
    record.save()
    progress = SweepProgress(record)
    started: list = []

    def connect():
        started.append(engine.connect(args.address, args.num_cpus, args.num_gpus))
        return started[0]
    # vllm/ drivers: the trials of this node share one server per model, kept between trials
    # and stopped when the sweep ends (runtime/run/driver_share.py)
    served = any((p.trial.driver or "").startswith("vllm/") for p in plans)
    try:
        with SweepHold(runs_dir / SHARED_SERVERS) if served else nullcontext():
            result = engine.run_sweep(connect, plans, runs_dir, _verifier(), progress,
                                      max_concurrent=args.max_concurrent,
                                      max_resumes=args.max_resumes, no_bwrap=args.no_bwrap)
    finally:
        progress.close()
        if started and not args.address:
            started[0].shutdown()
    record.finish(write_leaderboard(runs_dir, record.sweep.failed_runs()), result.ran)
    progress.console.print((runs_dir / f"{LEADERBOARD_NAME}.md").read_text(encoding="utf-8"))
    counts = record.counts()
    progress.console.print(f"sweep {suite.id}: {counts.finished} finished, "
                           f"{counts.failed} failed, {len(result.ran)} run now; "
                           f"{record.path}")
    return 0 if not counts.failed else 1
