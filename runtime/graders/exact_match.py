"""Exact match of a numeric (or short string) answer: GSM8K and tasks in its `#### N` format.

Extraction follows the benchmark: the answer is what follows `#### ` (the spec's `pattern`, a
regular expression whose first group, if any, is the answer); when the pattern does not match,
`fallback: last_number` takes the last number in the output and `fallback: none` gives no answer.
Both the extracted answer and the gold answer (itself extracted with the same pattern when the
gold text contains it, as GSM8K's rationale-plus-`#### N` answers do) are normalised before they
are compared: thousands separators, `$` and `%`, surrounding punctuation, a leading `+`, and
trailing zeros after a decimal point (`72.0` == `72`, `-0` == `0`).
"""

from __future__ import annotations

import re
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from a2c.contracts.grade_result import GradeResult
from a2c.runtime.graders.base import Grader, GraderError, as_samples

DEFAULT_PATTERN = r"####\s*(-?[\d,.]+)"
NUMBER_RE = re.compile(r"[-+\u2212]?\s?[$\u20ac\u00a3]?\s?(?:\d[\d,]*(?:\.\d+)?|\.\d+)%?")
NORMALIZE_STEPS = ("unicode_minus", "currency", "percent", "thousands", "punctuation", "sign",
                   "trailing_zeros", "lowercase")
_PUNCT = " \t\r\n.,;:!?()[]{}*\"'`_"


class ExactMatchGrader(Grader):
    kind = "exact_match"
    version = "1.0"

    def __init__(self, grader_cfg: dict[str, Any]):
        super().__init__(grader_cfg)
        pattern = self.params.get("pattern") or DEFAULT_PATTERN
        try:
            self.pattern = re.compile(pattern)
        except re.error as exc:
            raise GraderError(f"exact_match: pattern {pattern!r} is not a valid regular "
                              f"expression: {exc}") from None
        self.fallback = self.params.get("fallback", "last_number") or "none"
        if self.fallback not in ("last_number", "none"):
            raise GraderError(f"exact_match: fallback must be last_number or none, "
                              f"not {self.fallback!r}")
        self.match = self.params.get("match", "first")
        if self.match not in ("first", "last"):
            raise GraderError(f"exact_match: match must be first or last, not {self.match!r}")
        norm = self.params.get("normalize", "number")
        if norm is True or norm in ("all", "number"):
            self.steps = set(NORMALIZE_STEPS) - {"lowercase"}
        elif norm == "text":
            self.steps = {"lowercase", "unicode_minus"}
        elif norm in (False, None, "none"):
            self.steps = set()
        elif isinstance(norm, (list, tuple)):
            unknown = set(norm) - set(NORMALIZE_STEPS)
            if unknown:
                raise GraderError(f"exact_match: unknown normalize steps {sorted(unknown)} "
                                  f"(known: {', '.join(NORMALIZE_STEPS)})")
            self.steps = set(norm)
        else:
            raise GraderError(f"exact_match: normalize must be number, text or none, "
                              f"not {norm!r}")
        self.normalize_mode = norm if isinstance(norm, str) else "custom"
        answer_pattern = self.params.get("answer_pattern")
        try:
            self.answer_pattern = re.compile(answer_pattern) if answer_pattern else self.pattern
        except re.error as exc:
            raise GraderError(f"exact_match: answer_pattern {answer_pattern!r} is not a valid "
                              f"regular expression: {exc}") from None

    # ---------------------------------------------------------------- extraction
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

    def gold_answer(self, record: dict[str, Any]) -> str:
        gold = record.get("answer")
        if gold is None:
            raise GraderError(f"record {record.get('id')!r} has no 'answer' field")
        gold = str(gold)
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
        if "thousands" in steps and re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?", s) or "thousands" in steps and re.fullmatch(r"[-+]?[\d,]+(\.\d+)?", s):
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

    # ---------------------------------------------------------------- scoring
    def score_item(self, record: dict[str, Any], prompt: Any, output: str | None,
                   error: str | None = None) -> dict[str, Any]:
        gold_raw = self.gold_answer(record)
        gold = self.normalize(gold_raw)
        extracted_raw, how = self.extract(output)
        extracted = self.normalize(extracted_raw)
        correct = extracted is not None and extracted != "" and extracted == gold
        return {"id": record["id"], "prompt": prompt, "output": output,
                "extracted": extracted, "extracted_raw": extracted_raw, "extraction": how,
                "gold": gold, "gold_raw": gold_raw, "correct": bool(correct),
                "score": 1.0 if correct else 0.0, "error": error}

    def _result(self, items: list[dict], backend: str, started: float,
                extra: dict | None = None) -> GradeResult:
        n = len(items)
        n_correct = sum(1 for it in items if it["correct"])
        metrics = {
            "accuracy": 100.0 * n_correct / n if n else 0.0,
            "n_correct": n_correct,
            "n_no_answer": sum(1 for it in items if it["extracted"] is None),
            "n_fallback": sum(1 for it in items if it["extraction"] == "last_number"),
            "n_missing": sum(1 for it in items if it["error"] == "missing prediction"),
            "pattern": self.pattern.pattern, "fallback": self.fallback,
            "normalize": self.normalize_mode, "normalize_steps": sorted(self.steps),
            **(extra or {}),
        }
        return self.finish(items, metrics, backend, started)

    def grade_model(self, model_path: str | Path, records: list[dict],
                    backend_kind: str = "auto") -> GradeResult:
        started = time.monotonic()
        prompts = [self.build_prompt(r) for r in records]
        outputs, backend = self.generate(model_path, prompts, backend_kind, n=1)
        items = [self.score_item(r, p, o[0] if o else None)
                 for r, p, o in zip(records, prompts, outputs)]
        return self._result(items, backend, started,
                            {"inference": {k: v for k, v in self.inference.items()}})

    def grade_predictions(self, predictions: dict[str, Any], records: list[dict]) -> GradeResult:
        started = time.monotonic()
        items = []
        for r in records:
            samples = as_samples(predictions.get(str(r["id"])))
            prompt = self.build_prompt(r)
            if samples is None:
                items.append(self.score_item(r, prompt, None, error="missing prediction"))
            else:
                items.append(self.score_item(r, prompt, samples[0]))
        return self._result(items, "predictions", started)
