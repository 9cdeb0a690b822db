"""`a2c check TASK [--agent ID] [--budget D]`: the author's gate, before a task is committed.

A task that validates and builds can still be unwinnable: a pattern that cannot read its own gold
answers, a held-out split that repeats the training data, a reference agent taught another
format. Like Harbor's oracle run and Terminal-Bench's task check, this proves the task with its
real grader, one numbered point per line:

  (1) the gold answers, written in the task's answer format, score 100 through the real grader
      (level 3: the expert walkthroughs played in the real environment win);
  (2) empty and corrupted answers score 0;
  (3) the agent and held-out splits are disjoint (ids and contents); their sizes are printed;
  (4) the base model is scored (the cached baseline of `a2c run` where there is one);
  (5) with `--agent`, that reference agent runs under a short budget and the gain over the
      baseline is printed with its 95% interval (paired bootstrap over the held-out items).

A failed point is one line saying what to fix. What cannot run on this machine (a judge without
its endpoint, data not downloaded) is a SKIP line saying why. Exit status: 0 every point that
can run here passed; 1 a point failed (or the spec does not compile); 3 nothing failed but the
task could not be checked here (its data or base model is not available).
This module is in the CLI layer because it combines the compiler (the spec is compiled first, so
the check sees the spec as it is now) and the runtime (data, graders, baseline, a run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.errors import A2CError

EXIT_FAILED = 1
EXIT_CANNOT_CHECK = 3
DEFAULT_BUDGET = "7m"
_SPLIT_PROBLEMS = ("share", "duplicate ids", "is empty")   # load_splits' refusals: point (3)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check", help="prove a task: gold answers score 100, empty ones 0, splits disjoint, "
                      "baseline, and (--agent) a reference agent's gain",
        description="The author's gate: compile the task, score its gold answers in the answer "
                    "format (100) and empty/corrupted answers (0) with the real grader, check "
                    "the splits are disjoint, score the baseline, and with --agent run a "
                    "reference agent under a short budget and print its gain with an interval.")
    p.add_argument("task", help="a task spec file, a task id, or a bundle folder")
    p.add_argument("--agent", help="also run this (reference) agent, e.g. ref-sft")
    p.add_argument("--budget", default=DEFAULT_BUDGET,
                   help=f"the agent's wall clock with --agent (default {DEFAULT_BUDGET})")
    p.add_argument("--agent-param", action="append", default=[], metavar="NAME=VALUE",
                   help="with --agent: set one of the agent's params (its spec's `params:`, "
                        "as `a2c run --agent-param`); repeatable")
    p.add_argument("--runs-dir", help="where the agent's run directory goes (default: ./runs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-baseline", action="store_true",
                   help="skip point (4) (and so (5)): the quick data and grader check only")
    p.set_defaults(handler=run)


@dataclass
class Report:
    """The numbered lines, printed as they come; failures decide the exit status."""

    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cannot_check: bool = False

    def ok(self, point: str, text: str) -> None:
        self._line("PASS", point, text)

    def fail(self, point: str, text: str) -> None:
        self.failed.append(point)
        self._line("FAIL", point, text)

    def skip(self, point: str, text: str) -> None:
        self.skipped.append(point)
        self._line("SKIP", point, text)

    @staticmethod
    def _line(status: str, point: str, text: str) -> None:
        """One line per point: a model output's newlines are shown as \\n."""
        print(f"{status} {point} {text}".replace("\n", "\\n"), flush=True)

    def note(self, text: str) -> None:
        print(f"     {text}", flush=True)


# ------------------------------------------------------------------ the task as it is now

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


# ------------------------------------------------------------------ (3) the splits

def _content(record: dict) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "id"}, sort_keys=True,
                      ensure_ascii=False, default=str)


def check_splits(report: Report, task: dict, root: Path):
    """(splits or None, the point-(3) line to print after (1) and (2), in the points' order)."""
    from a2c.runtime.data import load_splits
    from a2c.runtime.data.generators import DataError

    try:
        splits = load_splits(task, root, None)
    except DataError as exc:
        message = " ".join(str(exc).split())
        if any(word in message for word in _SPLIT_PROBLEMS):
            report.fail("(3) splits:", f"{message}")
        else:
            report.cannot_check = True
            report.skip("(3) splits:", f"the data cannot be loaded here: {message}")
        return None, lambda: None
    agent, held = splits["agent"], splits["heldout"]
    seen = {}
    for rec in agent:
        seen.setdefault(_content(rec), rec["id"])
    repeats = [(r["id"], seen[_content(r)]) for r in held if _content(r) in seen]
    sizes = f"agent {len(agent)} records, held-out {len(held)} records"
    if repeats:
        hid, aid = repeats[0]
        return splits, lambda: report.fail(
            "(3) splits:", f"{len(repeats)} of the {len(held)} held-out records repeat an agent "
            f"record ({sizes}; e.g. held-out '{hid}' = agent '{aid}'): remove them from one "
            f"split so the held-out data stays unseen")
    return splits, lambda: report.ok("(3) splits:", f"{sizes}, disjoint (ids and contents)")


# ------------------------------------------------------------------ (1) and (2) per grader

def _corrupt(gold: str) -> str:
    """A wrong answer that looks right: the number plus one, or the text with its first
    character changed (and its case kept)."""
    from decimal import Decimal, InvalidOperation
    try:
        return str(Decimal(gold.replace(",", "")) + 1)
    except (InvalidOperation, ValueError):
        pass
    if not gold:
        return "x"
    first = gold[0]
    swap = "Q" if first.isupper() else "q"
    if first.lower() == "q":
        swap = "Z" if first.isupper() else "z"
    return swap + gold[1:]


def _first_wrong(result, want_correct: bool) -> dict | None:
    for item in result.items:
        if bool(item.get("correct")) != want_correct:
            return item
    return None


def _grade(grader, predictions: dict[str, str], records: list[dict]):
    return grader.grade_predictions({k: [v] for k, v in predictions.items()}, records)


def check_exact_match(report: Report, grader, params: dict, records: list[dict],
                      agent_records: list[dict]) -> None:
    """(1) over both splits (the agent's gold answers are its training targets), (2) held-out."""
    from a2c.answer_format import derive, render

    # a bundle compiled before answer_format existed: the format its pattern implies
    fmt = params.get("answer_format") or derive(str(params.get("pattern") or ""))
    if not fmt:
        report.fail("(1) gold answers:", "the task states no answer format; add "
                    "grader.params.answer_format, e.g. 'Answer: {answer}'")
        return
    both = records + agent_records
    targets = {str(r["id"]): render(fmt, grader.gold_answer(r)) for r in both}
    gold = _grade(grader, targets, both)
    if gold.score == 100.0:
        report.ok("(1) gold answers:", f"{gold.score:.1f} on {len(records)} held-out and "
                  f"{len(agent_records)} agent records written as '{fmt}' "
                  f"(e.g. '{targets[str(records[0]['id'])]}')")
    else:
        item = _first_wrong(gold, True)
        read = "no match" if item.get("extracted_raw") is None else \
            f"'{item.get('extracted_raw')}'"
        report.fail("(1) gold answers:", f"{gold.score:.1f}, not 100: the pattern does not "
                    f"match the gold answer written as the target: '{item['output']}' -> {read} "
                    f"(record '{item['id']}', gold '{item.get('gold')}'); widen "
                    f"grader.params.pattern or change answer_format/normalize")
    golds = {str(r["id"]): grader.gold_answer(r) for r in records}
    empty = _grade(grader, {i: "" for i in golds}, records)
    wrong = _grade(grader, {i: render(fmt, _corrupt(g)) for i, g in golds.items()}, records)
    _zero(report, empty, "empty answers", "")
    _zero(report, wrong, "corrupted answers", "the pattern or normalize accepts a wrong answer; "
                                             "make them stricter")


def _zero(report: Report, result, what: str, fix: str) -> None:
    if result.score == 0.0:
        report.ok("(2) " + what + ":", f"{result.score:.1f} on {result.n_items} records")
        return
    item = _first_wrong(result, False) or {}
    report.fail("(2) " + what + ":", f"{result.score:.1f}, not 0: '{item.get('output')}' was "
                f"scored right for record '{item.get('id')}' (gold '{item.get('gold')}')"
                f"{'; ' + fix if fix else ''}")


def check_humaneval(report: Report, grader, records: list[dict]) -> None:
    gold = _grade(grader, {str(r["id"]): str(r.get("answer") or "") for r in records}, records)
    if gold.score == 100.0:
        report.ok("(1) gold answers:", f"the canonical solutions pass their tests: "
                  f"{gold.score:.1f} on {gold.n_items} problems")
    else:
        item = _first_wrong(gold, True)
        report.fail("(1) gold answers:", f"{gold.score:.1f}, not 100: the canonical solution "
                    f"of '{item['id']}' fails its tests ({item.get('error')}); fix the record or "
                    f"raise grader.params.timeout/memory_mb")
    _zero(report, _grade(grader, {str(r["id"]): "" for r in records}, records),
          "empty answers", "")
    broken = "    raise RuntimeError('corrupted')\n"
    _zero(report, _grade(grader, {str(r["id"]): broken for r in records}, records),
          "corrupted answers", "a test passes without the function working; strengthen it")


def check_judge(report: Report, params: dict, records: list[dict]) -> None:
    field_name = params.get("reference_field") or "answer"
    missing = [r["id"] for r in records if not str(r.get(field_name) or "").strip()]
    if missing:
        report.fail("(1) references:", f"{len(missing)} held-out records have no reference "
                    f"output in '{field_name}' (e.g. '{missing[0]}'); the judge compares with it")
    else:
        report.ok("(1) references:", f"every held-out record has a reference output in "
                  f"'{field_name}' ({len(records)} records)")
    report.skip("(1)(2) judge:", "scoring the references (50 against themselves) and empty "
                "answers (0) needs the judge model's endpoint (A2C_JUDGE_* variables, "
                "docs/graders.md); it is not run offline")


def _walkthrough(record: dict) -> list[str]:
    walk = record.get("walkthrough")
    if isinstance(walk, list) and walk:
        return [str(a) for a in walk]
    return [a.strip() for a in str(record.get("answer") or "").split(";") if a.strip()]


def check_rollout(report: Report, grader, records: list[dict]) -> None:
    """Gold: each game's expert walkthrough, played as the policy through the real grader (one
    episode at a time, so the policy knows its game); empty: a policy that says nothing."""
    won, lost = 0, []
    for rec in records:
        actions = iter(_walkthrough(rec))
        result = grader.grade_policy(lambda prompts, a=actions: [next(a, "look") for _ in prompts],
                                     [rec], lockstep=False)
        if result.items and result.items[0].get("correct"):
            won += 1
        else:
            lost.append((rec["id"], (result.items or [{}])[0].get("error")))
    score = 100.0 * won / len(records) if records else 0.0
    if not lost:
        report.ok("(1) gold answers:", f"the expert walkthroughs win {score:.1f}% of "
                  f"{len(records)} held-out episodes in the real environment")
    else:
        rid, why = lost[0]
        report.fail("(1) gold answers:", f"{score:.1f}, not 100: the expert walkthrough of "
                    f"'{rid}' does not win ({why or 'episode ended without a win'}; {len(lost)} "
                    f"of {len(records)}); raise grader.env.max_steps or fix the game")
    empty = grader.grade_policy(lambda prompts: ["" for _ in prompts], records)
    _zero(report, empty, "empty answers", "an episode is won without acting; check the game")


def check_grader(report: Report, grader_cfg: dict, splits: dict[str, list[dict]]) -> None:
    from a2c.contracts.spec import GraderSpec
    from a2c.runtime.graders import get_grader

    grader_spec = GraderSpec.from_dict(grader_cfg)
    kind, params = grader_spec.kind, grader_spec.params or {}
    heldout = splits["heldout"]
    if kind == "pairwise_judge":
        check_judge(report, params, heldout)
        return
    grader = get_grader(grader_cfg)
    if kind == "exact_match":
        check_exact_match(report, grader, params, heldout, splits["agent"])
    elif kind == "humaneval":
        check_humaneval(report, grader, heldout)
    elif kind == "rollout":
        check_rollout(report, grader, heldout)
    else:
        report.skip("(1)(2):", f"grader kind '{kind}' has no gold-answer check")


# ------------------------------------------------------------------ (4) baseline, (5) agent

def check_baseline(report: Report, task: dict, bundle_root: Path, grader_cfg: dict,
                   heldout: list[dict], work: Path) -> dict | None:
    from a2c.contracts.spec import GraderSpec, TaskSpec
    from a2c.runtime import models
    from a2c.runtime.data import write_jsonl
    from a2c.runtime.grader_service.baseline import compute_baseline
    from a2c.runtime.run.prepare import baseline_cache
    from a2c.runtime.run.resolve import model_cfg

    grader_spec = GraderSpec.from_dict(grader_cfg)
    if grader_spec.kind == "pairwise_judge":
        report.skip("(4) baseline:", "needs the judge endpoint (A2C_JUDGE_*); not run offline")
        return None
    spec = TaskSpec.from_dict(task)
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
                               backend=(grader_spec.inference or {}).get("backend", "auto"),
                               cache_dir=baseline_cache(),
                               timeout_s=float(spec.budget.eval_timeout_s or 3600))
    if not summary.get("valid"):
        report.fail("(4) baseline:", f"the base model could not be scored: {summary.get('error')}"
                    f"; fix the grader's inference settings")
        return None
    lo, hi = summary.get("ci95") or (0.0, 0.0)
    cached = ", cached" if summary.get("cached") else f", {summary.get('elapsed_s', 0):.0f}s"
    report.ok("(4) baseline:", f"{summary['score']:.1f} (95% CI {lo:.1f}-{hi:.1f}) on "
              f"{len(heldout)} held-out records{cached}")
    if summary["score"] >= 100.0:
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


def _run_baseline(run_dir: Path, baseline: dict) -> dict:
    """The run's own results/baseline.json (what the report pairs against), else the check's."""
    from a2c.contracts.grade_result import read_result_or_none
    from a2c.contracts.run_paths import RunPaths
    result = read_result_or_none(RunPaths(run_dir).baseline_result)
    return result if result is not None else baseline.get("result") or {}


def check_agent_params(args: argparse.Namespace, work: Path) -> None:
    """The agent's --agent-param values, checked against its declarations before point (1), so a
    typo costs a second, not the minutes of points (1)-(4)."""
    from a2c.cli.run import compile_if_needed
    from a2c.contracts.agent_params import effective, parse_assignments
    from a2c.runtime.run.resolve import load_agent, resolve_agent_bundle
    args.agent = compile_if_needed(args.agent, "Agent", work)
    effective(load_agent(resolve_agent_bundle(args.agent)), parse_assignments(args.agent_param))


def check_agent(report: Report, args: argparse.Namespace, bundle_root: Path,
                baseline: dict) -> None:
    from a2c.cli.run import prepare_from_refs
    from a2c.contracts.agent_params import parse_assignments
    from a2c.runtime import run as run_mod
    opts = run_mod.RunOptions(bundle=str(bundle_root), agent=args.agent, budget=args.budget,
                              runs_dir=args.runs_dir, seed=args.seed, backend="local",
                              agent_params=parse_assignments(args.agent_param or []))
    started = time.monotonic()
    ctx = prepare_from_refs(opts, lambda message: None)
    report.note(f"running {args.agent} for {args.budget} (a line per submission and score)")
    result = run_mod.execute(ctx, report=lambda message: progress_line(report, started,
                                                                        message))
    run_dir = Path(result["run_dir"])
    best = _best_result(run_dir)
    elapsed = time.monotonic() - started
    where = f"record {run_dir}"
    if best is None:
        report.fail("(5) agent:", f"{args.agent} made no valid submission in {args.budget} "
                    f"({result.get('status')}); read {run_dir}/logs/agent.log ({where})")
        return
    from a2c.intervals import paired_improvement  # the report's interval, the same call
    paired = paired_improvement(best, _run_baseline(run_dir, baseline)) or {}
    lo, hi = paired.get("ci95") or (0.0, 0.0)
    base = baseline["score"]
    line = (f"{args.agent} in {args.budget}: baseline {base:.1f} -> best {best['score']:.1f} "
            f"(submission {best['submission']} of {result.get('submissions')}), gain "
            f"{best['score'] - base:+.1f} points (paired 95% CI {lo:+.1f} to {hi:+.1f}, "
            f"{paired.get('method', 'BCa')} bootstrap, seed {paired.get('seed', 0)}, as `a2c "
            f"report` gives it), {elapsed:.0f}s; {where}")
    if best["score"] > base:
        report.ok("(5) agent:", line)
        if lo <= 0:
            report.note("the interval includes 0: more held-out records, or a longer budget, "
                        "would make the gain clear")
    else:
        report.fail("(5) agent:", f"{line}: no gain; does the reference agent write the "
                    f"task's answer format (workspace/run_meta.json task.answer_format)?")


# ------------------------------------------------------------------ the command

def run(args: argparse.Namespace) -> int:
    from a2c.contracts.service_config import GRADER_JSON, read_grader_json
    from a2c.durations import parse_duration
    from a2c.errors import SpecError

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
        if args.agent:
            check_agent_params(args, work / "agent")   # a refused param: exit 2, nothing run
        task = bundle.task
        grader_json = bundle.root / GRADER_JSON
        grader_cfg = read_grader_json(grader_json) if grader_json.is_file() else task["grader"]
        print(f"a2c check {bundle.task_spec.id}: level {bundle.task_spec.level}, "
              f"grader {grader_cfg.get('kind')}, "
              f"bundle {bundle.root}", flush=True)
        splits, splits_line = check_splits(report, task, bundle.root)
        if splits is not None:
            if grader_cfg.get("kind") == "rollout":
                from a2c.cli.eval import _task_services, _with_env_data_root
                grader_cfg = _with_env_data_root({**task, "grader": grader_cfg}, bundle.root)
                try:
                    with _task_services(task):
                        check_grader(report, grader_cfg, splits)
                except A2CError as exc:     # an environment service that cannot start here
                    report.cannot_check = True
                    report.skip("(1)(2):", "the task's environment cannot run here: "
                                f"{str(exc).splitlines()[0]}")
            else:
                check_grader(report, grader_cfg, splits)
        splits_line()
        baseline = None
        if report.cannot_check:
            report.skip("(4)(5):", "not run: the task cannot run on this machine (above)")
        elif splits is None or report.failed:
            report.skip("(4)(5):", "not run: fix the points above first")
        elif args.no_baseline:
            report.skip("(4)(5):", "not run (--no-baseline)")
        else:
            baseline = check_baseline(report, task, bundle.root, grader_cfg, splits["heldout"],
                                      work)
        if args.agent:
            if baseline is None:
                if "(4)(5):" not in report.skipped:
                    report.skip("(5) agent:", "not run: it needs the baseline of point (4)")
            else:
                check_agent(report, args, bundle.root, baseline)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    if report.failed:
        print(f"a2c check {args.task}: {len(report.failed)} point(s) failed ({elapsed:.1f}s)")
        return EXIT_FAILED
    if report.cannot_check:
        print(f"a2c check {args.task}: could not be checked here ({elapsed:.1f}s)")
        return EXIT_CANNOT_CHECK
    note = f", {len(report.skipped)} skipped" if report.skipped else ""
    print(f"a2c check {args.task}: passed ({elapsed:.1f}s{note})")
    return 0
