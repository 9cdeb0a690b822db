"""The task's answer format as a reference agent needs it: the training target for a record, and
whether an output is right exactly when the grader would score it right.

`AnswerFormat` reads `run_meta.json`'s `task.answer_format` and `task.grader_params`; the check
itself is the exact_match grader's own reading (`a2c.answer_match`, which the grader scores
with), so a training target or a reward never disagrees with the score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from a2c.answer_match import DEFAULT_PATTERN, AnswerMatch

_NUM = re.compile(r"-?\d+(?:\.\d+)?")
DEFAULT_FORMAT = "#### {answer}"


@dataclass
class AnswerFormat:
    """How the task writes and reads an answer: the template the bundle states
    (`run_meta.json` `task.answer_format`, e.g. `Answer: {answer}`) and the grader's own
    extraction (`task.grader_params`, read with the grader's `a2c.answer_match`), so a training
    target or a reward is right exactly when the grader would score it right. A bundle compiled
    before the answer format existed gives the arithmetic task's `#### {answer}`."""

    template: str = DEFAULT_FORMAT
    params: dict = field(default_factory=lambda: {"pattern": DEFAULT_PATTERN,
                                                  "normalize": "number", "fallback": "none"})

    @classmethod
    def from_task(cls, task: dict) -> AnswerFormat:
        given = dict(task.get("grader_params") or {})
        given.setdefault("pattern", task.get("answer_pattern") or DEFAULT_PATTERN)
        if not task.get("grader_params"):
            given.setdefault("normalize", "number")
        given.setdefault("fallback", "none")
        return cls(template=task.get("answer_format") or given.get("answer_format")
                   or DEFAULT_FORMAT, params=given)

    @property
    def matcher(self) -> AnswerMatch:
        cached = self.__dict__.get("_matcher")
        if cached is None:
            cached = AnswerMatch(self.params)
            self.__dict__["_matcher"] = cached
        return cached

    def gold(self, record: dict) -> str:
        """The gold answer as the grader reads it (the text after '####' for GSM8K answers)."""
        return self.matcher.gold(str(record.get("answer", "")).strip())

    def write(self, answer: str) -> str:
        return self.template.replace("{answer}", str(answer))

    def found(self, text: str) -> bool:
        """The pattern reads an answer out of `text` (the format, right or wrong)."""
        return self.matcher.extract(text)[1] == "pattern"

    def correct(self, text: str, gold_text: str) -> bool:
        """The grader would score `text` right against the record answer `gold_text`."""
        return self.matcher.compare(text, str(gold_text))["correct"]


def final_answer(record: dict, fmt: AnswerFormat | None = None) -> str:
    """The gold answer as the grader extracts it (the text after '####' when present)."""
    return (fmt or AnswerFormat()).gold(record)


def _worked_arithmetic(record: dict, gold: str) -> str | None:
    """'A + B = C' when the prompt's first two numbers give the gold answer by one operation."""
    numbers = _NUM.findall(str(record.get("prompt", "")))
    if len(numbers) < 2:
        return None
    a, b = numbers[0], numbers[1]
    for op, fn in (("+", lambda x, y: x + y), ("-", lambda x, y: x - y),
                   ("*", lambda x, y: x * y)):
        try:
            if fn(float(a), float(b)) == float(gold):
                return f"{a} {op} {b} = {gold}"
        except ValueError:
            return None
    return None


def completion_for(record: dict, fmt: AnswerFormat | None = None) -> str:
    """The training target: the answer written in the task's answer format (`fmt`).

    A record that carries a worked solution the grader already reads right (GSM8K's
    'rationale ... #### 72' answers, or a `completion`/`solution` field) keeps it; a solution that
    does not end in the format gets the formatted answer appended. For arithmetic prompts the
    operation is written out first ('A + B = C'), when the grader still reads the gold answer.
    Otherwise the target is just the format with the gold answer: 'Answer: Paris'.
    """
    fmt = fmt or AnswerFormat()
    gold_text = str(record.get("answer", "")).strip()
    gold = fmt.gold(record)
    for key in ("completion", "solution"):
        if record.get(key):
            text = str(record[key]).strip()
            return text if fmt.correct(text, gold_text) else f"{text}\n{fmt.write(gold)}"
    if gold_text != gold and fmt.correct(gold_text, gold_text):
        return gold_text
    target = fmt.write(gold)
    worked = _worked_arithmetic(record, gold)
    if worked and fmt.correct(f"{worked}\n{target}", gold_text):
        return f"{worked}\n{target}"
    return target


def extract_answer(text: str, pattern: str = DEFAULT_PATTERN) -> str | None:
    match = re.search(pattern, text or "")
    if not match:
        return None
    return match.group(1).replace(",", "").rstrip(".").strip()


def same_number(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()
