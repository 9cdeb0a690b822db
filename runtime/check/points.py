"""Points (1)-(3) of `a2c check`, on a compiled task bundle: the gold answers, written in the
task's answer format, score 100 through the real grader (level 3: the expert walkthroughs win);
empty and corrupted answers score 0; the agent and held-out splits are disjoint."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.graded_item import GradedItem, graded_items
from a2c.contracts.spec import GraderSpec, RolloutEnvSpec, TaskSpec
from a2c.errors import A2CError
from a2c.runtime.check.report import Report

_SPLIT_PROBLEMS = ("share", "duplicate ids", "is empty")   # load_splits' refusals: point (3)


@dataclass(frozen=True)
class Splits:
    """The task's records as the run would load them: the agent's and the held-out ones."""

    agent: list[dict[str, Any]]
    heldout: list[dict[str, Any]]


# ------------------------------------------------------------------ (3) the splits

def _content(record: dict) -> str:
    return json.dumps({k: v for k, v in record.items() if k != "id"}, sort_keys=True,
                      ensure_ascii=False, default=str)


def check_splits(report: Report, task: TaskSpec,
                 root: Path) -> tuple[Splits | None, Callable[[], None]]:
    """(splits or None, the point-(3) line to print after (1) and (2), in the points' order)."""
    from a2c.runtime.data import load_splits
    from a2c.runtime.data.generators import DataError

    try:
        loaded = load_splits(task, root, None)
    except DataError as exc:
        message = " ".join(str(exc).split())
        if any(word in message for word in _SPLIT_PROBLEMS):
            report.fail("(3) splits:", f"{message}")
        else:
            report.cannot_check = True
            report.skip("(3) splits:", f"the data cannot be loaded here: {message}")
        return None, lambda: None
    splits = Splits(agent=loaded["agent"], heldout=loaded["heldout"])
    agent, held = splits.agent, splits.heldout
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


def _first_wrong(result, want_correct: bool) -> GradedItem | None:
    for item in graded_items(result.items):
        if bool(item.correct) != want_correct:
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
        read = "no match" if item.extracted_raw is None else f"'{item.extracted_raw}'"
        report.fail("(1) gold answers:", f"{gold.score:.1f}, not 100: the pattern does not "
                    f"match the gold answer written as the target: '{item.output}' -> {read} "
                    f"(record '{item.id}', gold '{item.gold}'); widen "
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
    item = _first_wrong(result, False) or GradedItem()
    report.fail("(2) " + what + ":", f"{result.score:.1f}, not 0: '{item.output}' was "
                f"scored right for record '{item.id}' (gold '{item.gold}')"
                f"{'; ' + fix if fix else ''}")


def check_humaneval(report: Report, grader, records: list[dict]) -> None:
    gold = _grade(grader, {str(r["id"]): str(r.get("answer") or "") for r in records}, records)
    if gold.score == 100.0:
        report.ok("(1) gold answers:", f"the canonical solutions pass their tests: "
                  f"{gold.score:.1f} on {gold.n_items} problems")
    else:
        item = _first_wrong(gold, True)
        report.fail("(1) gold answers:", f"{gold.score:.1f}, not 100: the canonical solution "
                    f"of '{item.id}' fails its tests ({item.error}); fix the record or "
                    f"raise grader.params.timeout/memory_mb")
    _zero(report, _grade(grader, {str(r["id"]): "" for r in records}, records),
          "empty answers", "")
    broken = "    raise RuntimeError('corrupted')\n"
    _zero(report, _grade(grader, {str(r["id"]): broken for r in records}, records),
          "corrupted answers", "a test passes without the function working; strengthen it")


def check_judge(report: Report, params: dict, records: list[dict]) -> None:
    from a2c.runtime.graders.judge import JudgeParams
    field_name = JudgeParams.of(params).reference_field or "answer"
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
        played = (graded_items(result.items) or [GradedItem()])[0]
        if played.correct:
            won += 1
        else:
            lost.append((rec["id"], played.error))
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


def check_grader(report: Report, grader_spec: GraderSpec, splits: Splits) -> None:
    from a2c.runtime.graders import get_grader

    kind, params = grader_spec.kind, grader_spec.params or {}
    if kind == "pairwise_judge":
        check_judge(report, params, splits.heldout)
        return
    grader = get_grader(grader_spec.to_dict())
    if kind == "exact_match":
        check_exact_match(report, grader, params, splits.heldout, splits.agent)
    elif kind == "humaneval":
        check_humaneval(report, grader, splits.heldout)
    elif kind == "rollout":
        check_rollout(report, grader, splits.heldout)
    else:
        report.skip("(1)(2):", f"grader kind '{kind}' has no gold-answer check")


def _rollout_grader(task: TaskSpec, grader: GraderSpec, bundle_root: Path) -> GraderSpec:
    """The grader with `env.data_root` set to where this task's record paths resolve (unless
    it names one)."""
    from a2c.runtime.data import data_root
    env = grader.env or RolloutEnvSpec()
    if env.data_root is None:
        env = dataclasses.replace(env, data_root=str(data_root(task, bundle_root)))
    return dataclasses.replace(grader, env=env)


def _services(task: TaskSpec, log_dir: Path):
    """The task's declared environment services, running for the rollouts (logs in `log_dir`)."""
    import contextlib

    services = task.environment.services
    if not services:
        return contextlib.nullcontext()
    from a2c.runtime.env_services import env_services_running
    log_dir.mkdir(parents=True, exist_ok=True)
    return env_services_running(services, log_dir=log_dir)


def check_points_1_to_3(report: Report, task: TaskSpec, grader: GraderSpec, bundle_root: Path,
                        work: Path) -> Splits | None:
    """Points (1), (2) and (3), printed in that order; the splits (None: not loadable)."""
    splits, splits_line = check_splits(report, task, bundle_root)
    if splits is not None:
        if grader.kind == "rollout":
            try:
                with _services(task, work / "services"):
                    check_grader(report, _rollout_grader(task, grader, bundle_root), splits)
            except A2CError as exc:     # an environment service that cannot start here
                report.cannot_check = True
                report.skip("(1)(2):", "the task's environment cannot run here: "
                            f"{str(exc).splitlines()[0]}")
        else:
            check_grader(report, grader, splits)
    splits_line()
    return splits
