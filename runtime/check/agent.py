"""Points (4) and (5) of `a2c check`: the base model scored (the cached baseline `a2c run`
uses), and with an agent, a short run of it and its gain over the baseline with the paired 95%
interval `a2c report` gives, said in words with its likely cause (runtime/check/diagnose.py).

The agent's run is a real run, recorded like any other, but it is the check's, not the author's
result: it goes to `.a2c/check-runs/` of the project (`check_runs_dir`), not `runs/`, so no
leaderboard over `runs/` counts it (a leaderboard never walks into a folder whose name starts
with a dot either). It is kept, and named in the output, so `a2c report` can read it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a2c.contracts.inference import InferenceBlock
from a2c.contracts.spec import TaskSpec
from a2c.runtime.check import diagnose
from a2c.runtime.check.report import Report

if TYPE_CHECKING:   # the baseline pulls in the models module: imported where it runs
    from a2c.runtime.grader_service.baseline import BaselineSummary

DEFAULT_BUDGET = "7m"
CHECK_RUNS = Path(".a2c") / "check-runs"
_IGNORE_ALL = "# a2c's own working files (a2c check's agent runs): never committed\n*\n"


@dataclass
class AgentCheck:
    """Point (5)'s settings: the agent (a compiled agent bundle), its budget and params, where
    its run goes (None: `check_runs_dir()`), the seed."""

    agent: str
    budget: str = DEFAULT_BUDGET
    agent_params: dict[str, Any] = field(default_factory=dict)
    runs_dir: Path | None = None
    seed: int = 0


def check_runs_dir() -> Path:
    """PROJECT/.a2c/check-runs, made on first use, with a .gitignore that ignores all of .a2c."""
    from a2c.paths import project_root
    folder = project_root() / CHECK_RUNS
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text(_IGNORE_ALL, encoding="utf-8")
    return folder


def check_baseline(report: Report, task: TaskSpec, bundle_root: Path, grader_cfg: dict,
                   heldout: list[dict], work: Path) -> BaselineSummary | None:
    from a2c.contracts.spec import GraderSpec
    from a2c.runtime import models
    from a2c.runtime.data import write_jsonl
    from a2c.runtime.grader_service.baseline import compute_baseline
    from a2c.runtime.run.prepare import baseline_cache
    from a2c.runtime.run.resolve import model_cfg

    grader_spec = GraderSpec.from_dict(grader_cfg)
    if grader_spec.kind == "pairwise_judge":
        report.skip("(4) baseline:", "needs the judge endpoint (A2C_JUDGE_*); not run offline")
        return None
    spec = task
    try:
        model = Path(models.resolve_base_model(model_cfg(None, spec.base_model.to_dict()),
                                               bundle_root))
    except Exception as exc:  # noqa: BLE001 - a hub model offline, a missing folder
        report.cannot_check = True
        report.skip("(4) baseline:", "the base model is not available here: "
                    + " ".join(str(exc).split()))
        return None
    path = write_jsonl(work / "heldout.jsonl", heldout)
    summary = compute_baseline(task_id=spec.id, base_model=model, grader_cfg=grader_cfg,
                               heldout=path,
                               engine=InferenceBlock.of(grader_spec.inference).engine,
                               cache_dir=baseline_cache(),
                               timeout_s=float(spec.budget.eval_timeout_s or 3600))
    if not summary.valid:
        report.fail("(4) baseline:", f"the base model could not be scored: {summary.error}"
                    f"; fix the grader's inference settings")
        return None
    lo, hi = summary.ci95 or (0.0, 0.0)
    cached = ", cached" if summary.cached else f", {summary.elapsed_s:.0f}s"
    report.ok("(4) baseline:", f"{summary.score:.1f} (95% CI {lo:.1f}-{hi:.1f}) on "
              f"{len(heldout)} held-out records{cached}")
    if summary.score >= 100.0:
        report.note("the base model already scores 100: no agent can improve it")
    return summary


PROGRESS_WORDS = ("submission ", "baseline score", "agent exited", "agent started",
                  "deadline", "final split")


def progress_line(report: Report, started: float, message: str) -> None:
    """The run's own lines about submissions and scores, as they come, so a ten-minute agent
    point shows it is alive (the rest of the runtime's chatter stays out)."""
    text = str(message).strip()
    if any(word in text for word in PROGRESS_WORDS):
        report.note(f"  {time.monotonic() - started:5.0f}s  {text.splitlines()[0][:200]}")


def _best_result(run_dir: Path) -> dict | None:
    """The best valid submission's results file, as the report picks it: the highest score,
    the earliest submission on a tie, copies of the base model left out."""
    from a2c.contracts.grade_result import numbered_results, read_result_or_none
    from a2c.contracts.run_paths import RunPaths
    best = None
    for path in numbered_results(RunPaths(run_dir).results):
        result = read_result_or_none(path)
        if result is None:
            continue
        if result.get("valid", True) and result.get("score") is not None \
                and not result.get("copy_of_base") \
                and (best is None or result["score"] > best["score"]):
            best = {**result, "submission": path.stem}
    return best


def _run_baseline(run_dir: Path, baseline: BaselineSummary) -> dict:
    """The run's own results/baseline.json (what the report pairs against), else the check's."""
    from a2c.contracts.grade_result import read_result_or_none
    from a2c.contracts.run_paths import RunPaths
    result = read_result_or_none(RunPaths(run_dir).baseline_result)
    return result if result is not None else baseline.result or {}


def _shown(path: Path) -> str:
    """A path as the user can type it: relative to the current folder when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def check_agent(report: Report, opts: AgentCheck, bundle_root: Path, baseline: BaselineSummary,
                grader_kind: str) -> None:
    """Point (5): run the agent, then its gain, the outputs' format and correctness, and why."""
    from a2c.contracts.run_summary import RunSummary
    from a2c.intervals import paired_improvement  # the report's interval, the same call
    from a2c.runtime import run as run_mod

    runs_dir = Path(opts.runs_dir) if opts.runs_dir else check_runs_dir()
    run_opts = run_mod.RunOptions(bundle=str(bundle_root), agent=opts.agent, budget=opts.budget,
                                  runs_dir=runs_dir, seed=opts.seed, backend="local",
                                  agent_params=dict(opts.agent_params))
    started = time.monotonic()
    ctx = run_mod.prepare(run_opts, lambda message: None)
    name = ctx.run.agent
    report.note(f"running {name} for {opts.budget} in {_shown(ctx.run_dir)} "
                f"(a line per submission and score)")
    result = RunSummary.from_dict(run_mod.execute(
        ctx, report=lambda message: progress_line(report, started, message)))
    run_dir = Path(result.run_dir)
    kept = "the check's own folder: no leaderboard of runs/ counts it" if not opts.runs_dir \
        else "--runs-dir"
    where = f"record {_shown(run_dir)} (kept, in {kept}; read it with `a2c report`)"
    best = _best_result(run_dir)
    elapsed = time.monotonic() - started
    if best is None:
        report.fail("(5) agent:", f"{name} made no valid submission in {opts.budget} "
                    f"({result.status}); read {_shown(run_dir)}/logs/agent.log; {where}")
        return
    run_baseline = _run_baseline(run_dir, baseline)
    paired = paired_improvement(best, run_baseline) or {}
    lo, hi = paired.get("ci95") or (0.0, 0.0)
    base = baseline.score
    gain = best["score"] - base
    line = (f"{name} in {opts.budget}: baseline {base:.1f} -> best {best['score']:.1f} "
            f"(submission {best['submission']} of {result.submissions}), gain "
            f"{gain:+.1f} points (paired 95% CI {lo:+.1f} to {hi:+.1f}, "
            f"{paired.get('method', 'BCa')} bootstrap, seed {paired.get('seed', 0)}, as `a2c "
            f"report` gives it), {elapsed:.0f}s")
    best_outputs = diagnose.count(best, grader_kind)
    base_outputs = diagnose.count(run_baseline, grader_kind)
    said = diagnose.verdict(gain, (lo, hi), opts.budget, best_outputs, base_outputs)
    {"pass": report.ok, "warn": report.warn, "fail": report.fail}[said.status](
        "(5) agent:", f"{line}: {said.why}" if said.why else line)
    if best_outputs is not None and said.status != "fail":    # a FAIL line gives them already
        base_words = f"; base model: {base_outputs.words()}" if base_outputs else ""
        report.note(f"held-out outputs of the best model: {best_outputs.words()}{base_words}")
    report.note(where)
