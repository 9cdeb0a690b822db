"""Item outcomes of the best submission (the report's `outcomes`): accuracy, items fixed and
broken against the baseline, and a few right and wrong examples (clipped)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from a2c.contracts.records import Record

from .record import RunRecord
from .result_file import ResultFile
from .rows import SubmissionRow
from .values import clip, finite, rounded

MAX_EXAMPLES = 3
EXAMPLE_WIDTH = 400
MAX_STEPS = 30               # an episode's steps shown (its length is `steps`)
OBSERVATION_WIDTH = 2000


def _episode_step(step: Any) -> dict[str, Any]:
    """One step of a level-3 episode as {action, observation, reward, output} (clipped), for
    the report to render as a step, not as a line of JSON."""
    if not isinstance(step, dict):
        return {"action": None, "observation": _clip(step, OBSERVATION_WIDTH), "reward": None,
                "output": None}
    return {"action": _clip(step.get("action"), EXAMPLE_WIDTH),
            "observation": _clip(step.get("observation"), OBSERVATION_WIDTH),
            "reward": finite(step.get("reward")),
            "output": _clip(step.get("output"), OBSERVATION_WIDTH) or None}


def _clip(value: Any, width: int = EXAMPLE_WIDTH) -> Any:
    if value is None or isinstance(value, (int, float, bool)):
        return value
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return clip(text, width)


@dataclass
class GradedItem(Record):
    """One item of a results file (`items` of results/<n>.json, as a grader writes it: see
    a2c.contracts.grade_result), as the outcomes read it; a level-3 episode adds `reward`,
    `trajectory` and `first_observation`."""

    id: Any = None
    prompt: Any = None
    output: Any = None
    extracted: Any = None
    gold: Any = None
    correct: Any = None
    score: Any = None
    error: Any = None
    reward: Any = None
    trajectory: Any = None
    first_observation: Any = None

    @property
    def key(self) -> str:
        return str(self.id)

    @property
    def right(self) -> bool | None:
        """Answered right (`correct`, else a positive score); None when the grader says
        neither."""
        if isinstance(self.correct, bool):
            return self.correct
        score = finite(self.score)
        return None if score is None else score > 0


def _items(result: ResultFile | None) -> list[GradedItem]:
    items = result.items if result and isinstance(result.items, list) else []
    return [GradedItem.from_dict(i) for i in items if isinstance(i, dict)]


def _example(item: GradedItem, baseline: dict[str, bool | None]) -> dict[str, Any]:
    example = {"id": item.key, "correct": item.right, "score": finite(item.score),
               "reward": finite(item.reward), "baseline_correct": baseline.get(item.key)}
    for key, value in (("prompt", item.prompt), ("output", item.output),
                       ("extracted", item.extracted), ("gold", item.gold),
                       ("error", item.error)):
        if value is not None:
            example[key] = _clip(value)
    if isinstance(item.trajectory, list):
        example["steps"] = len(item.trajectory)
        example["trajectory"] = [_episode_step(step) for step in item.trajectory[:MAX_STEPS]]
        if item.first_observation is not None:
            example["first_observation"] = _clip(item.first_observation, OBSERVATION_WIDTH)
        if isinstance(item.prompt, str):   # an episode's task: long, kept readable
            example["prompt"] = _clip(item.prompt, OBSERVATION_WIDTH)
    return example


def best_outcomes(record: RunRecord, subs: list[SubmissionRow], level: Any,
                  best_index: int | None) -> dict[str, Any] | None:
    """None when no submission counts; `available: False` when its results file is missing."""
    if best_index is None:
        return None
    best = next(s for s in subs if s.index == best_index)
    result = ResultFile.of(record.result(best.result_file)) if best.result_file else None
    if result is None:
        return {"submission_id": best.id, "available": False, "n_items": 0, "n_correct": 0,
                "accuracy": None, "metrics": {}, "grader": None, "fixed": None, "broken": None,
                "examples": []}
    items = _items(result)
    baseline = ResultFile.of(record.result("results/baseline.json"))
    base_items = {i.key: i.right for i in _items(baseline)}
    fixed = broken = None
    if base_items:
        fixed = broken = 0
        for item in items:
            before, after = base_items.get(item.key), item.right
            if before is False and after is True:
                fixed += 1
            elif before is True and after is False:
                broken += 1
    n_correct = sum(1 for i in items if i.right)
    right = [i for i in items if i.right]
    wrong = [i for i in items if i.right is False]
    examples = [_example(item, base_items) for item in right[:MAX_EXAMPLES] + wrong[:MAX_EXAMPLES]]
    given = result.metrics if isinstance(result.metrics, dict) else {}
    metrics = {k: v for k, v in given.items()
               if isinstance(v, (int, float, str, bool)) or v is None}
    return {"submission_id": best.id, "available": True, "n_items": len(items),
            "n_correct": n_correct, "accuracy": rounded(n_correct / len(items)) if items else None,
            "metrics": metrics, "grader": result.grader, "fixed": fixed,
            "broken": broken, "examples": examples,
            "unit": "episode" if str(level) == "3" else "item"}
