"""Exact match of a numeric (or short string) answer: GSM8K and tasks in its `#### N` format.

Extraction follows the benchmark: the answer is what follows `#### ` (the spec's `pattern`, a
regular expression whose first group, if any, is the answer); when the pattern does not match,
`fallback: last_number` takes the last number in the output and `fallback: none` gives no answer.
Both the extracted answer and the gold answer (itself extracted with the same pattern when the
gold text contains it, as GSM8K's rationale-plus-`#### N` answers do) are normalised before they
are compared: thousands separators, `$` and `%`, surrounding punctuation, a leading `+`, and
trailing zeros after a decimal point (`72.0` == `72`, `-0` == `0`). The reading itself is
`a2c.answer_match` (bottom layer), which the reference agents use too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.answer_match import AnswerMatch, AnswerMatchError
from a2c.contracts.grade_result import GradeResult
from a2c.contracts.records import Record
from a2c.contracts.spec import GraderSpec
from a2c.runtime.graders.base import Grader, GraderError, as_samples


@dataclass
class ExactMatchItem(Record):
    """One graded item (a `GradeResult` item): what was extracted, how, and the gold answer."""

    id: Any = None
    prompt: Any = None
    output: str | None = None
    extracted: str | None = None
    extracted_raw: str | None = None
    extraction: str = "none"
    gold: str | None = None
    gold_raw: str | None = None
    correct: bool = False
    score: float = 0.0
    error: str | None = None


class ExactMatchGrader(Grader):
    kind = "exact_match"
    version = "1.0"

    def __init__(self, grader_cfg: GraderSpec | dict[str, Any]):
        super().__init__(grader_cfg)
        try:
            self.matcher = AnswerMatch(self.params)
        except AnswerMatchError as exc:
            raise GraderError(str(exc)) from None
        self.pattern, self.answer_pattern = self.matcher.pattern, self.matcher.answer_pattern
        self.fallback, self.match = self.matcher.fallback, self.matcher.match
        self.steps, self.normalize_mode = self.matcher.steps, self.matcher.normalize_mode

    def answer_stop(self) -> Any:
        """Stop a sequence once its extracted answer is decided (answer_stop.py's rule: the first
        match of `pattern` found without reading past the end of the text so far)."""
        from a2c.runtime.inference.answer_stop import AnswerStop
        return AnswerStop.for_matcher(self.matcher)

    # ---------------------------------------------------------------- extraction
    def extract(self, output: str | None) -> tuple[str | None, str]:
        """(answer, how) where how is 'pattern', 'last_number' or 'none'."""
        return self.matcher.extract(output)

    def gold_answer(self, record: dict[str, Any]) -> str:
        gold = record.get("answer")
        if gold is None:
            raise GraderError(f"record {record.get('id')!r} has no 'answer' field")
        return self.matcher.gold(str(gold))

    def normalize(self, text: str | None) -> str | None:
        return self.matcher.normalize(text)

    # ---------------------------------------------------------------- scoring
    def score_item(self, record: dict[str, Any], prompt: Any, output: str | None,
                   error: str | None = None) -> dict[str, Any]:
        return self._judge(record, prompt, output, error).to_dict()

    def _judge(self, record: dict[str, Any], prompt: Any, output: str | None,
               error: str | None = None) -> ExactMatchItem:
        gold_raw = self.gold_answer(record)
        gold = self.normalize(gold_raw)
        extracted_raw, how = self.extract(output)
        extracted = self.normalize(extracted_raw)
        correct = extracted is not None and extracted != "" and extracted == gold
        return ExactMatchItem(id=record["id"], prompt=prompt, output=output, extracted=extracted,
                              extracted_raw=extracted_raw, extraction=how, gold=gold,
                              gold_raw=gold_raw, correct=bool(correct),
                              score=1.0 if correct else 0.0, error=error)

    def _result(self, items: list[ExactMatchItem], backend: str, started: float,
                extra: dict | None = None) -> GradeResult:
        n = len(items)
        n_correct = sum(1 for it in items if it.correct)
        metrics = {
            "accuracy": 100.0 * n_correct / n if n else 0.0,
            "n_correct": n_correct,
            "n_no_answer": sum(1 for it in items if it.extracted is None),
            "n_fallback": sum(1 for it in items if it.extraction == "last_number"),
            "n_missing": sum(1 for it in items if it.error == "missing prediction"),
            "pattern": self.pattern.pattern, "fallback": self.fallback,
            "normalize": self.normalize_mode, "normalize_steps": sorted(self.steps),
            **(extra or {}),
        }
        return self.finish([it.to_dict() for it in items], metrics, backend, started)

    def grade_model(self, model_path: str | Path, records: list[dict],
                    engine: str = "auto") -> GradeResult:
        started = time.monotonic()
        prompts = [self.build_prompt(r) for r in records]
        outputs, backend = self.generate(model_path, prompts, engine, n=1)
        items = [self._judge(r, p, o[0] if o else None)
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
                items.append(self._judge(r, prompt, None, error="missing prediction"))
            else:
                items.append(self._judge(r, prompt, samples[0]))
        return self._result(items, "predictions", started)
