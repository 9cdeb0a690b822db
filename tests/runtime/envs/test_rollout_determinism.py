"""Determinism of the rollout grader (level 3): the same model plays the same TextWorld games
twice with greedy decoding and gets the same score and the same trajectories."""

from __future__ import annotations

import pytest

from a2c.runtime.envs.rollout_grader import RolloutGrader

pytest.importorskip("torch")


def test_rollout_grader_is_deterministic(tw_games, tiny_path):
    root, splits = tw_games
    cfg = {"kind": "rollout", "env": {"kind": "textworld", "max_steps": 3,
                                      "history": {"max_tokens": 512}, "data_root": str(root)},
           "inference": {"max_new_tokens": 8, "temperature": 0.0, "batch_size": 3,
                         "engine": "transformers"}}
    first = RolloutGrader(cfg).grade_model(tiny_path, splits["test"], "transformers")
    second = RolloutGrader(cfg).grade_model(tiny_path, splits["test"], "transformers")
    assert first.valid and second.valid, (first.error, second.error)
    assert first.score == second.score and first.ci95 == second.ci95
    assert [(i["id"], i.get("trajectory"), i.get("score")) for i in first.items] == \
        [(i["id"], i.get("trajectory"), i.get("score")) for i in second.items]
    assert all(i.get("trajectory") for i in first.items)
