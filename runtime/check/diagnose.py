"""Point (5) of `a2c check` in words: what the agent's gain says, and when there is none, its
likely cause, read from the per-item results the grader wrote (`RUN/results/<n>.json`).

Two numbers tell the causes apart: how many held-out outputs of the trained model follow the
task's answer format (exact_match: the pattern read the answer, `extraction == "pattern"`, not
the `last_number` fallback; humaneval: the completion runs as Python, no syntax error) and how
many are correct. Few in the format: the agent did not learn the format. Most in the format but
none more correct than the base model: the format is learnt, the skill is not — the task is too
hard for this agent and budget. A gain whose interval excludes 0 but is under `SMALL_GAIN`
points is real but small: the task is barely learnable at this budget. Pure functions: the
callers read the files.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2c.contracts.graded_item import GradedItem, graded_items

SMALL_GAIN = 10.0        # points on the 0-100 scale: a clear gain under it is "small for the budget"
FORMAT_LEARNT = 0.5      # the share of outputs in the answer format that counts as "learnt"
_SYNTAX = ("failed: SyntaxError", "failed: IndentationError", "failed: TabError")


@dataclass(frozen=True)
class Outputs:
    """The held-out outputs of one model: how many, how many in the answer format (None: the
    grader has no answer format to count, e.g. a rollout), how many correct."""

    n: int
    in_format: int | None
    correct: int

    def words(self) -> str:
        if self.in_format is None:
            return f"{self.correct} of {self.n} correct"
        return f"format followed in {self.in_format} of {self.n} outputs, {self.correct} correct"

    def format_learnt(self) -> bool:
        return self.in_format is not None and self.in_format >= FORMAT_LEARNT * self.n


def in_format(item: GradedItem, grader_kind: str) -> bool | None:
    """Whether one output follows the task's answer format; None when the grader has none."""
    if grader_kind == "exact_match":
        return item.extraction == "pattern"
    if grader_kind == "humaneval":
        error = str(item.error or "")
        return bool(item.output) and not error.startswith(_SYNTAX) \
            and error != "missing prediction"
    return None


def count(result: dict | None, grader_kind: str) -> Outputs | None:
    """The counts of a results file's items (None: no per-item results to count)."""
    items = graded_items((result or {}).get("items") or [])
    if not items:
        return None
    marks = [in_format(item, grader_kind) for item in items]
    return Outputs(n=len(items),
                   in_format=None if any(m is None for m in marks) else sum(map(bool, marks)),
                   correct=sum(1 for item in items if item.correct))


@dataclass(frozen=True)
class Verdict:
    """status: "pass" (a clear gain), "warn" (a gain, but small or not clear: passes, with the
    reason), "fail" (no gain); `why` is the sentence that follows the numbers."""

    status: str
    why: str


def _points(value: float) -> str:
    return f"{value:+.0f}" if abs(value - round(value)) < 0.05 else f"{value:+.1f}"


def verdict(gain: float, ci95: tuple[float, float], budget: str, best: Outputs | None,
            base: Outputs | None) -> Verdict:
    """The gain of the agent's best model over the base model, in words, with its cause."""
    lo, hi = ci95
    interval = f"gain {_points(gain)} (interval {_points(lo)}..{_points(hi)})"
    if gain > 0 and lo > 0:
        if gain >= SMALL_GAIN:
            return Verdict("pass", "")
        return Verdict("warn", f"{interval} is real but small for {budget} (under "
                               f"{SMALL_GAIN:.0f} points): the task is barely learnable at this "
                               f"budget; try a longer --budget")
    if gain > 0:
        return Verdict("warn", f"{interval} is not clear: the interval includes 0; a longer "
                               f"--budget or more held-out records would make it clear")
    if best is None:
        return Verdict("fail", "no gain, and the results hold no per-item outputs to say why")
    base_words = f" (base model: {base.words()})" if base is not None else ""
    if best.in_format is not None and not best.format_learnt():
        return Verdict("fail", f"{best.words()}{base_words}: the agent did not learn the "
                               f"answer format; check that it writes the task's answer format "
                               f"(workspace/run_meta.json task.answer_format) and that "
                               f"grader.inference.prompt_template asks for it")
    followed = "the outputs follow the format but are not right: " \
        if best.in_format is not None else ""
    return Verdict("fail", f"{best.words()}{base_words}: {followed}the task is too hard for this "
                           f"agent and budget ({budget}); try a longer --budget, more training "
                           f"records, or an easier task")
