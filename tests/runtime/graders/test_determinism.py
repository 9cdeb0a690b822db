"""Determinism: the same submission scored twice gives the same score and the same per-item
outputs (greedy decoding), for each grader kind that runs here (exact_match, humaneval,
pairwise_judge with the fake judge; rollout in tests/runtime/envs/test_rollout_determinism.py).
The tiny built-in model keeps it fast; what matters is that nothing in the path (batching,
sampling seeds, sandboxed test runs, judge order swaps, the bootstrap) varies between calls."""

from __future__ import annotations

import json

import pytest
from grader_helpers import GENERATED

from a2c.runtime.graders import get_grader

pytest.importorskip("torch")


def bundle_grader(task_id: str, **inference) -> dict:
    cfg = json.loads((GENERATED / task_id / "grader" / "grader.json").read_text())
    cfg["inference"] = {**cfg["inference"], "engine": "transformers", "batch_size": 4,
                        **inference}
    return cfg


def outputs(result) -> list[tuple]:
    return [(i["id"], i.get("output"), i.get("extracted"), i.get("score"))
            for i in result.items]


def twice(cfg: dict, model, records):
    grader = get_grader(cfg)
    first = grader.grade_model(model, records, "transformers")
    second = get_grader(cfg).grade_model(model, records, "transformers")
    assert first.valid and second.valid, (first.error, second.error)
    return first, second


def same(first, second):
    assert first.score == second.score and first.ci95 == second.ci95
    assert outputs(first) == outputs(second)
    assert all(isinstance(o, str) for _, o, _, _ in outputs(first))


def test_exact_match_is_deterministic(tiny_path):
    records = [{"id": f"a{i}", "prompt": f"What is {i} plus {i + 3}?", "answer": str(2 * i + 3)}
               for i in range(6)]
    same(*twice(bundle_grader("arith", max_new_tokens=12), tiny_path, records))


def test_humaneval_is_deterministic(tiny_path, humaneval_problems):
    same(*twice(bundle_grader("humaneval", max_new_tokens=24), tiny_path,
                humaneval_problems[:3]))


def test_pairwise_judge_is_deterministic(tiny_path, fake_judge, alpaca_records):
    first, second = twice(bundle_grader("alpacaeval", max_new_tokens=16), tiny_path,
                          alpaca_records[:3])
    same(first, second)
    assert first.metrics.get("win_rate") == second.metrics.get("win_rate")
