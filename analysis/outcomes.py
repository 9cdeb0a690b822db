"""Item outcomes of the best submission (the report's `outcomes`): accuracy, items fixed and
broken against the baseline, and a few right and wrong examples (clipped)."""

from __future__ import annotations

import json
from typing import Any

from .record import RunRecord
from .summary import SubmissionRow
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


def _correct(item: dict[str, Any]) -> bool | None:
    if isinstance(item.get("correct"), bool):
        return item["correct"]
    score = finite(item.get("score"))
    return None if score is None else score > 0


def best_outcomes(record: RunRecord, subs: list[SubmissionRow], level: Any,
                  best_index: int | None) -> dict[str, Any] | None:
    """None when no submission counts; `available: False` when its results file is missing."""
    if best_index is None:
        return None
    best = next(s for s in subs if s.index == best_index)
    result = record.result(best.result_file) if best.result_file else None
    if result is None:
        return {"submission_id": best.id, "available": False, "n_items": 0, "n_correct": 0,
                "accuracy": None, "metrics": {}, "grader": None, "fixed": None, "broken": None,
                "examples": []}
    items = [i for i in result.get("items") or [] if isinstance(i, dict)]
    baseline = record.result("results/baseline.json") or {}
    base_items = {str(i.get("id")): _correct(i) for i in baseline.get("items") or []
                  if isinstance(i, dict)}
    fixed = broken = None
    if base_items:
        fixed = broken = 0
        for item in items:
            before = base_items.get(str(item.get("id")))
            after = _correct(item)
            if before is False and after is True:
                fixed += 1
            elif before is True and after is False:
                broken += 1
    n_correct = sum(1 for i in items if _correct(i))
    examples = []
    right = [i for i in items if _correct(i)]
    wrong = [i for i in items if _correct(i) is False]
    for item in right[:MAX_EXAMPLES] + wrong[:MAX_EXAMPLES]:
        example = {"id": str(item.get("id")), "correct": _correct(item),
                   "score": finite(item.get("score")), "reward": finite(item.get("reward")),
                   "baseline_correct": base_items.get(str(item.get("id")))}
        for key in ("prompt", "output", "extracted", "gold", "error"):
            if item.get(key) is not None:
                example[key] = _clip(item[key])
        trajectory = item.get("trajectory")
        if isinstance(trajectory, list):
            example["steps"] = len(trajectory)
            example["trajectory"] = [_episode_step(step) for step in trajectory[:MAX_STEPS]]
            if item.get("first_observation") is not None:
                example["first_observation"] = _clip(item["first_observation"], OBSERVATION_WIDTH)
            if isinstance(item.get("prompt"), str):   # an episode's task: long, kept readable
                example["prompt"] = _clip(item["prompt"], OBSERVATION_WIDTH)
        examples.append(example)
    metrics = {k: v for k, v in (result.get("metrics") or {}).items()
               if isinstance(v, (int, float, str, bool)) or v is None}
    return {"submission_id": best.id, "available": True, "n_items": len(items),
            "n_correct": n_correct, "accuracy": rounded(n_correct / len(items)) if items else None,
            "metrics": metrics, "grader": result.get("grader"), "fixed": fixed,
            "broken": broken, "examples": examples,
            "unit": "episode" if str(level) == "3" else "item"}
