"""`a2c run` and `a2c demo`: run a bundle with an agent, resume a run, or watch the demo.

Heavy libraries are imported inside the handlers only (the CLI must stay fast to start).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from a2c.contracts.run_summary import DriverUsage, RunSummary
from a2c.errors import RunError
from a2c.modes import FREE, MODES
from a2c.runtime.sandbox import BACKENDS

DEMO_TASK = "arith"
DEMO_AGENT = "ref-sft"
# The demo's preset, fitted to a 2-core machine: one SFT stage of 20 steps x 8 records (the
# reference agent's own params; SmolLM2's loss is flat by step 15) submitted once, instead of two
# stages of 25 each submitted and scored; the agent's time-limit callback stops earlier on a
# slower machine, and the run ends when the agent does, not at the budget.
DEMO_BUDGET = "2m30s"
DEMO_AGENT_PARAMS = {"ref-sft": {"stages": 1, "steps": 20}}


def register(subparsers) -> None:
    run = subparsers.add_parser(
        "run", help="run a task bundle with an agent (or resume a run)",
        description="Run an agent on a task: prepare an isolated workspace, start the grader, "
                    "run the agent under the budget, record everything, score the run.")
    run.add_argument("bundle", nargs="?", metavar="BUNDLE_OR_SPEC",
                     help="a bundle folder (generated/<id>), a task spec file, or a task id")
    run.add_argument("--agent", help="agent id (generated/agents/<id>), agent bundle or spec")
    run.add_argument("--model", help="base model override: a model folder, a builtin name "
                                     "(tiny, smollm2-135m-instruct) or a hub id[@revision]")
    run.add_argument("--budget", help="wall-clock budget (e.g. 90s, 15m, 1h30m); "
                                      "default: the task's")
    run.add_argument("--mode", default=FREE, choices=list(MODES))
    run.add_argument("--backend", default="local", choices=list(BACKENDS))
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--driver", help="driver model for LLM scaffolds: provider/model "
                                      "(anthropic/claude-sonnet-4-5, a drivers-file provider), "
                                      "vllm/MODEL (a vLLM server a2c starts: a hub id, a model "
                                      "folder or a built-in name) or scripted:NAME (the "
                                      "offline scripted driver)")
    run.add_argument("--driver-tokens", type=_positive(int), metavar="N",
                     help="driver budget: tokens (input + output) the scaffold may spend; "
                          "default: the task's budget.driver_tokens")
    run.add_argument("--driver-cost", type=_positive(float), metavar="USD",
                     help="driver budget: cost in USD (by the gateway's price table); "
                          "default: the task's budget.driver_cost")
    run.add_argument("--driver-calls", type=_positive(int), metavar="N",
                     help="driver budget: calls to the driver model; "
                          "default: the task's budget.driver_calls")
    run.add_argument("--agent-param", action="append", default=[], metavar="NAME=VALUE",
                     help="set one of the agent's params (its spec's `params:`, e.g. steps=10 "
                          "for ref-sft); repeatable; typed and checked against the agent's "
                          "declarations before anything starts; recorded in run.json")
    run.add_argument("--runs-dir", help="where run directories go (default: ./runs)")
    run.add_argument("--run-id", help="the run directory's name under --runs-dir (default: "
                                      "TASK-AGENT-TIME-XXXX; a sweep names it by the trial id)")
    run.add_argument("--resume", metavar="RUN_DIR",
                     help="continue a run after a crash of the runtime or the grader")
    run.add_argument("--gpus", metavar="IDS",
                     help="the agent's GPUs: host device indices (0,1 = /dev/nvidia0 and "
                          "/dev/nvidia1) or none; default: the task's budget.gpus, chosen among "
                          "the free devices")
    run.add_argument("--grader-gpus", metavar="IDS",
                     help="the grader's GPUs for its evaluations (never the agent's): indices "
                          "or none; default: one free device the agent does not have, when the "
                          "agent has GPUs")
    run.add_argument("--driver-gpus", metavar="IDS",
                     help="a vllm/ driver's GPUs for its server (never the agent's or the "
                          "grader's): indices or none (vLLM's CPU build); default: one free "
                          "device neither has, where the machine has GPUs")
    run.add_argument("--share-driver-server", metavar="DIR",
                     help="a vllm/ driver's server shared with the other runs on this machine "
                          "given the same folder and the same server (model, flags, GPUs, "
                          "seed): the first starts it, the last to end stops it (a2c sweep "
                          "gives its trials RUNS/.sweep/driver-servers)")
    run.add_argument("--no-bwrap", action="store_true",
                     help="local backend without bubblewrap (isolation: none; for debugging)")
    run.set_defaults(handler=handle_run)

    demo = subparsers.add_parser(
        "demo", help="the built-in demo: the SFT reference agent post-trains a small model",
        description="Build the built-in arithmetic task, run the scripted SFT reference agent "
                    "on SmolLM2-135M-Instruct (offline) with the local backend, print the summary.")
    demo.add_argument("--runs-dir", help="where the run directory goes (default: ./runs)")
    demo.add_argument("--agent", default=DEMO_AGENT, help="reference agent (ref-sft or ref-grpo)")
    demo.add_argument("--budget", default=DEMO_BUDGET,
                      help=f"wall-clock budget of the agent ({DEMO_BUDGET})")
    demo.set_defaults(handler=handle_demo)


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


class Progress:
    """Timestamped progress lines and the run's summary through rich.

    Nothing is ever wrapped mid-word: off a terminal (`a2c demo | cat`, a log file) a line is
    written whole, however long, and the summary is `key  value` lines; on a terminal a message
    wraps at word boundaries under its own column, and the summary is a table only when it fits
    the terminal's width without wrapping (else the same plain lines)."""

    def __init__(self, console=None):
        from rich.console import Console
        self.console = console or Console(highlight=False)
        self.start = time.monotonic()
        self._lock = threading.Lock()     # the runner may report from a timer thread

    def __call__(self, message: str) -> None:
        from rich.text import Text
        elapsed = time.monotonic() - self.start
        style = "bold yellow" if message.startswith("WARNING") else ""
        stamp = f"{elapsed:7.1f}s"
        lines = self.wrap(message, len(stamp) + 1)
        out = Text(stamp, style="dim") + Text(" ") + Text(lines[0], style=style)
        for more in lines[1:]:
            out += Text("\n" + " " * (len(stamp) + 1)) + Text(more, style=style)
        with self._lock:
            self.console.print(out, soft_wrap=True)

    def wrap(self, text: str, indent: int) -> list[str]:
        """`text` as the lines to print after `indent` columns: whole off a terminal; on one,
        wrapped at spaces only (a word longer than the width, a path, stays whole)."""
        if not self.console.is_terminal:
            return [text]
        import textwrap
        return textwrap.wrap(text, max(20, self.console.width - indent), break_long_words=False,
                             break_on_hyphens=False) or [""]

    def line(self, text: str = "", bold: bool = False) -> None:
        """One line as it is: no markup, no highlighting, never wrapped by rich."""
        from rich.text import Text
        with self._lock:
            self.console.print(Text(text, style="bold" if bold else ""), soft_wrap=True)

    def summary(self, result: RunSummary) -> None:
        from rich.markup import escape
        rows = summary_rows(result)
        title = f"a2c run {result.run_id}"
        table = summary_table(title, rows)
        if self.console.is_terminal and fits(self.console, table, title):
            with self._lock:
                self.console.print(table)
        else:
            width = max(len(key) for key, _ in rows)
            self.line(title, bold=True)
            for key, value in rows:
                first, *more = self.wrap(value, width + 4)
                self.line(f"  {key:<{width}}  {first}")
                for line in more:
                    self.line(" " * (width + 4) + line)
        tail = result.agent_log_tail
        if tail and not result.finished:
            status = escape(result.status)
            if result.reason:   # the last thing the agent said, one line (the tail is in run.json)
                self.console.print(f"[bold]{status}[/bold]: {escape(result.reason)} "
                                   "(the log: logs/agent.log)", highlight=False, soft_wrap=True)
                return
            self.console.print(f"[bold]{status}[/bold]: the last lines of logs/agent.log:",
                               soft_wrap=True)
            for line in tail:
                self.line("  " + line)


def summary_rows(result: RunSummary) -> list[tuple[str, str]]:
    """The summary's (key, value) rows: scores, counts, status, driver use, the record."""
    def fmt(value):
        return "—" if value is None else f"{value:.1f}"
    baseline, best = result.baseline_score, result.best_score
    gain = "" if baseline is None or best is None else f"  ({best - baseline:+.1f} points)"
    rows = [("task", result.task), ("agent", result.agent), ("mode", result.mode),
            ("isolation", str(result.isolation)),
            ("baseline score", fmt(baseline)), ("best score", fmt(best) + gain),
            ("final score", fmt(result.final_score)),
            ("submissions", f"{result.submissions} ({result.valid_submissions} valid)"),
            ("status", result.status), ("record", result.run_dir)]
    if result.has_final_split:   # scoring.final: the items it never got feedback on
        rows.insert(7, ("final split", f"{fmt(result.final_split_score)} (baseline "
                        f"{fmt(result.final_split_baseline)}; selection gap "
                        f"{fmt(result.selection_gap)})"))
    if result.driven:
        rows.insert(-2, ("driver", driver_line(result.driver, result.driver_usage)))
    return [(key, str(value)) for key, value in rows]


def summary_table(title: str, rows: list[tuple[str, str]]):
    from rich.table import Table
    from rich.text import Text
    table = Table(title=title, show_header=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, value in rows:
        table.add_row(key, Text(value))
    return table


def fits(console, table, title: str) -> bool:
    """Whether `table` (and its title) renders within the console's width without wrapping."""
    from rich.measure import Measurement
    width = console.width
    unlimited = console.options.update_width(1_000_000)   # its natural width, not the console's
    return len(title) <= width and Measurement.get(console, unlimited, table).maximum <= width


def a2c_command() -> str:
    """How to name a2c in a hint: `a2c` when that is what runs, else the path it was started by
    (`.venv/bin/a2c` after scripts/setup.sh, without the venv activated)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name != "a2c":
        return "a2c"
    found = shutil.which("a2c")
    try:
        if found and Path(found).resolve() == Path(argv0).resolve():
            return "a2c"
    except OSError:
        pass
    return argv0


def next_steps(run_dir: str, program: str = "a2c") -> list[str]:
    """What to do after the demo, with its run directory: verify the record, write the report,
    run an LLM agent on the same task (offline, through the scripted driver), the leaderboard,
    start a task of one's own."""
    runs_dir = shlex.quote(str(Path(run_dir).parent))
    run_dir = shlex.quote(str(run_dir))
    return [
        "next steps:",
        "  # check the record: its hash chain and signature",
        f"  {program} verify {run_dir}",
        "  # write the run's report (report.json, .md, .html in RUN_DIR/report)",
        f"  {program} report {run_dir}",
        "  # an LLM agent (Claude Code) on the same task, offline with the scripted",
        f"  # driver; install it first: {program} agents install claude-code",
        "  # (a real model: --driver anthropic/claude-sonnet-4-5, ANTHROPIC_API_KEY set)",
        f"  {program} run {DEMO_TASK} --agent claude-code --driver scripted:sft-recipe "
        "--budget 10m",
        "  # one table across the runs in this folder",
        f"  {program} leaderboard {runs_dir}",
        "  # your own task (README, \"Authoring a task\")",
        f"  {program} new task capitals",
    ]


def driver_line(driver: str | None, usage: DriverUsage | None) -> str:
    """`scripted:sft-recipe (scripted driver): 6 call(s), 166,050 tokens (10,000 in, 2,050 out,
    154,000 cache read), $0.0123`: the token total counts every kind, as the report does."""
    name = driver or "—"
    if usage is None:
        return f"{name}: no calls"
    cached = [f"{count:,} {label}" for count, label in (
        (usage.cache_read_tokens, "cache read"), (usage.cache_write_tokens, "cache write"))
        if count]
    if name.startswith("scripted"):
        name += " (scripted driver)"
    parts = [f"{usage.input_tokens:,} in", f"{usage.output_tokens:,} out", *cached]
    text = (f"{name}: {usage.calls} call(s), {usage.tokens:,} tokens "
            f"({', '.join(parts)}), ${usage.cost_usd:.4f}")
    if usage.errors:
        text += f", {usage.errors} error(s)"
    if usage.exhausted:
        text += f"; driver budget spent ({usage.spent_limit})"
    return text


def compile_if_needed(ref: str, kind: str, work: Path) -> str:
    """A bundle folder or an id built under generated/ passes through; a spec file, or an id with
    no generated bundle, is compiled into `work` first. The runtime runs bundles only, so the
    compiler is called here, in the CLI layer, and never from the runtime."""
    from a2c.runtime.run.resolve import find_bundle
    if find_bundle(ref, kind) is not None:
        return ref
    from a2c.compiler.build import build_specs
    from a2c.compiler.load import find_spec
    spec = find_spec(ref, kind=kind)
    built = build_specs([spec], work)
    manifest = "bundle.json" if kind == "Task" else "agent.json"
    for folder in built:
        if (folder / manifest).is_file():
            return str(folder.resolve())
    raise RunError(f"{ref}: compiled, but it is not a {kind.lower()} spec")


def prepare_from_refs(opts, report):
    """`run.prepare` with the task and agent given as bundles, specs or ids (compiled first)."""
    from a2c.runtime import run as run_mod
    from a2c.runtime.run.prepare import check_options
    check_options(opts)   # before anything is compiled (as prepare does before writing)
    build_tmp = Path(tempfile.mkdtemp(prefix="a2c-build-"))
    try:
        opts.bundle = compile_if_needed(opts.bundle, "Task", build_tmp / "task")
        opts.agent = compile_if_needed(opts.agent, "Agent", build_tmp / "agent")
        return run_mod.prepare(opts, report=report)
    finally:
        shutil.rmtree(build_tmp, ignore_errors=True)


def write_trajectory(result: RunSummary, report) -> None:
    """trajectory.json from the gateway's record, after the run (analysis reads the sealed record;
    the runtime cannot import it). Nothing for agents that called no driver."""
    from a2c.analysis.trajectory import maybe_write_trajectory
    path = maybe_write_trajectory(result.run_dir)
    if path is not None:
        report(f"trajectory: {path}")


def handle_run(args: argparse.Namespace) -> int:
    from a2c.runtime import run as run_mod
    progress = Progress()
    if args.resume:
        if args.bundle or args.agent or args.agent_param:
            raise RunError("--resume takes only the run directory (a resumed run keeps its "
                           "agent params)")
        result = RunSummary.from_dict(run_mod.resume(
            Path(args.resume), report=progress, gpus=args.gpus, grader_gpus=args.grader_gpus))
    else:
        if not args.bundle or not args.agent:
            raise RunError("usage: a2c run BUNDLE_OR_SPEC --agent ID (or a2c run --resume RUN_DIR)")
        from a2c.contracts.agent_params import parse_assignments
        opts = run_mod.RunOptions(bundle=args.bundle, agent=args.agent, model=args.model,
                                  budget=args.budget, mode=args.mode, backend=args.backend,
                                  seed=args.seed, runs_dir=args.runs_dir, run_id=args.run_id,
                                  driver=args.driver,
                                  driver_tokens=args.driver_tokens,
                                  driver_cost=args.driver_cost, driver_calls=args.driver_calls,
                                  gpus=args.gpus, grader_gpus=args.grader_gpus,
                                  driver_gpus=args.driver_gpus,
                                  share_driver_server=args.share_driver_server,
                                  agent_params=parse_assignments(args.agent_param or []),
                                  use_bwrap=False if args.no_bwrap else None)
        from a2c.cli.doctor import preflight  # `a2c doctor`'s checks this run needs
        from a2c.runtime.preflight import run_checks
        preflight(run_checks(args.backend, False if args.no_bwrap else None), progress,
                  fatal=("docker engine",))
        ctx = prepare_from_refs(opts, progress)
        result = RunSummary.from_dict(run_mod.execute(ctx, report=progress))
    write_trajectory(result, progress)
    progress.summary(result)
    return 0 if result.finished else 1


def handle_demo(args: argparse.Namespace) -> int:
    from a2c.runtime import run as run_mod
    progress = Progress()
    progress(f"a2c demo: task {DEMO_TASK} (two-digit addition, '#### N' answers), agent "
             f"{args.agent}, base model SmolLM2-135M-Instruct, local backend, budget {args.budget}")
    opts = run_mod.RunOptions(bundle=DEMO_TASK, agent=args.agent, budget=args.budget,
                              runs_dir=args.runs_dir, backend="local",
                              agent_params=dict(DEMO_AGENT_PARAMS.get(args.agent, {})))
    ctx = prepare_from_refs(opts, progress)
    result = RunSummary.from_dict(run_mod.execute(ctx, report=progress))
    progress.summary(result)
    elapsed = time.monotonic() - progress.start
    progress(f"demo finished in {elapsed:.0f}s (load average {os.getloadavg()[0]:.1f})")
    progress.line()
    for line in next_steps(result.run_dir, a2c_command()):
        progress.line(line)
    return 0 if result.finished else 1
