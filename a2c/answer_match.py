"""Reading an answer out of a model's output and comparing it with the gold one: the exact_match
grader's extraction and normalisation, in the bottom layer.

The grader (`runtime/graders/exact_match.py`) scores with it, and the reference agents build their
training targets and rewards with it (`agents/kit/answers.py`), so an agent's check agrees with the
score by construction, without the grader's code in the agent's sandbox view.

Extraction follows the benchmark: the answer is what follows `#### ` (the `pattern`, a regular
expression whose first group, if any, is the answer); when the pattern does not match,
`fallback: last_number` takes the last number in the output and `fallback: none` gives no answer.
Both the extracted answer and the gold answer (itself extracted with `answer_pattern`, default
`pattern`, when the gold text contains it, as GSM8K's rationale-plus-`#### N` answers do) are
normalised before they are compared: thousands separators, `$` and `%`, surrounding punctuation, a
leading `+`, and trailing zeros after a decimal point (`72.0` == `72`, `-0` == `0`).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

DEFAULT_PATTERN = r"####\s*(-?[\d,.]+)"
NUMBER_RE = re.compile(r"[-+\u2212]?\s?[$\u20ac\u00a3]?\s?(?:\d[\d,]*(?:\.\d+)?|\.\d+)%?")
NORMALIZE_STEPS = ("unicode_minus", "currency", "percent", "thousands", "punctuation", "sign",
                   "trailing_zeros", "lowercase")
_PUNCT = " \t\r\n.,;:!?()[]{}*\"'`_"


class AnswerMatchError(ValueError):
    """The params do not describe a valid match (the grader reports it as a GraderError)."""


def _compile(params: dict[str, Any], key: str, given: str) -> re.Pattern:
    try:
        return re.compile(given)
    except re.error as exc:
        raise AnswerMatchError(f"exact_match: {key} {given!r} is not a valid regular "
                               f"expression: {exc}") from None


def _steps(norm: Any) -> set[str]:
    if norm is True or norm in ("all", "number"):
        return set(NORMALIZE_STEPS) - {"lowercase"}
    if norm == "text":
        return {"lowercase", "unicode_minus"}
    if norm in (False, None, "none"):
        return set()
    if isinstance(norm, (list, tuple)):
        unknown = set(norm) - set(NORMALIZE_STEPS)
        if unknown:
            raise AnswerMatchError(f"exact_match: unknown normalize steps {sorted(unknown)} "
                                   f"(known: {', '.join(NORMALIZE_STEPS)})")
        return set(norm)
    raise AnswerMatchError(f"exact_match: normalize must be number, text or none, not {norm!r}")


class AnswerMatch:
    """One task's answer reading (an exact_match grader's `params`: pattern, fallback, match,
    normalize, answer_pattern)."""

    def __init__(self, params: dict[str, Any]):
        self.pattern = _compile(params, "pattern", params.get("pattern") or DEFAULT_PATTERN)
        self.fallback = params.get("fallback", "last_number") or "none"
        if self.fallback not in ("last_number", "none"):
            raise AnswerMatchError(f"exact_match: fallback must be last_number or none, "
                                   f"not {self.fallback!r}")
        self.match = params.get("match", "first")
        if self.match not in ("first", "last"):
            raise AnswerMatchError(f"exact_match: match must be first or last, "
                                   f"not {self.match!r}")
        norm = params.get("normalize", "number")
        self.steps = _steps(norm)
        self.normalize_mode = norm if isinstance(norm, str) else "custom"
        answer_pattern = params.get("answer_pattern")
        self.answer_pattern = _compile(params, "answer_pattern", answer_pattern) \
            if answer_pattern else self.pattern

    def extract(self, output: str | None) -> tuple[str | None, str]:
        """(answer, how) where how is 'pattern', 'last_number' or 'none'."""
        if not output:
            return None, "none"
        if "unicode_minus" in self.steps:
            output = output.replace("\u2212", "-")
        matches = list(self.pattern.finditer(output))
        if matches:
            m = matches[0] if self.match == "first" else matches[-1]
            text = m.group(1) if m.groups() else m.group(0)
            return text.strip(), "pattern"
        if self.fallback == "last_number":
            numbers = NUMBER_RE.findall(output)
            if numbers:
                return numbers[-1].strip(), "last_number"
        return None, "none"

    def gold(self, gold: str) -> str:
        """The gold answer read out of a record's answer text (its last `answer_pattern` match)."""
        matches = list(self.answer_pattern.finditer(gold))
        if matches:
            m = matches[-1]
            return (m.group(1) if m.groups() else m.group(0)).strip()
        return gold.strip()

    def normalize(self, text: str | None) -> str | None:
        if text is None:
            return None
        s = text.strip()
        steps = self.steps
        if "unicode_minus" in steps:
            s = s.replace("\u2212", "-").replace("\u2013", "-")
        # A captured answer may carry words ("72 dollars", "= 72"): keep its first number when it
        # has one and numeric normalisation is on.
        if steps & {"thousands", "trailing_zeros"}:
            m = NUMBER_RE.search(s)
            if m:
                s = m.group(0)
        if "currency" in steps:
            s = re.sub(r"[$\u20ac\u00a3]", "", s)
        if "percent" in steps:
            s = s.replace("%", "")
        if "punctuation" in steps:
            s = s.strip(_PUNCT)
        s = re.sub(r"^([-+])\s+", r"\1", s)
        if "thousands" in steps and (re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", s)
                                     or re.fullmatch(r"[-+]?[\d,]+(\.\d+)?", s)):
            s = s.replace(",", "")
        if "sign" in steps and s.startswith("+"):
            s = s[1:]
        if "trailing_zeros" in steps and re.fullmatch(r"-?(\d+(\.\d*)?|\.\d+)", s):
            try:
                d = Decimal(s)
                s = format(d.normalize(), "f")
                if s in ("-0", "-0.0"):
                    s = "0"
            except InvalidOperation:
                pass
        if "lowercase" in steps:
            s = " ".join(s.casefold().split())
        return s

    def compare(self, output: str | None, gold_text: str) -> dict[str, Any]:
        """The match of `output` against the record answer `gold_text`: both read and normalised,
        and whether they agree (an empty or missing answer never does)."""
        gold_raw = self.gold(gold_text)
        gold = self.normalize(gold_raw)
        extracted_raw, how = self.extract(output)
        extracted = self.normalize(extracted_raw)
        correct = extracted is not None and extracted != "" and extracted == gold
        return {"extracted": extracted, "extracted_raw": extracted_raw, "extraction": how,
                "gold": gold, "gold_raw": gold_raw, "correct": bool(correct)}
