import json

import pytest

from a2c.runtime.graders import GRADER_KINDS, GraderError, GradeResult, bootstrap_ci, get_grader
from a2c.runtime.graders.bootstrap import mean_score


def test_grade_result_round_trip():
    r = GradeResult(score=50.0, ci95=(10.0, 90.0), n_items=2,
                    items=[{"id": "a", "score": 1.0}, {"id": "b", "score": 0.0}],
                    metrics={"accuracy": 50.0}, grader="exact_match", grader_version="1.0",
                    backend="predictions", elapsed_s=0.5)
    d = r.to_dict()
    assert d["ci95"] == [10.0, 90.0] and d["valid"] is True and d["error"] is None
    back = GradeResult.from_dict(json.loads(json.dumps(d)))
    assert back == r
    assert "items" not in r.to_dict(items=False)


def test_invalid_result():
    r = GradeResult.invalid("humaneval", "1.0", "transformers", "model failed to load")
    assert r.score == 0 and not r.valid and r.error == "model failed to load"


def test_bootstrap_is_seeded_and_sensible():
    values = [1.0] * 60 + [0.0] * 40
    a = bootstrap_ci(values, seed=3)
    assert a == bootstrap_ci(values, seed=3)
    assert a != bootstrap_ci(values, seed=4)
    lo, hi = a
    assert lo < 60.0 < hi and 45 < lo and hi < 75
    assert bootstrap_ci([]) == (0.0, 0.0)
    assert bootstrap_ci([1.0, 1.0]) == (100.0, 100.0)
    assert mean_score(values) == 60.0


def test_registry():
    assert set(GRADER_KINDS) >= {"exact_match", "humaneval", "pairwise_judge", "rollout"}
    assert get_grader({"kind": "exact_match", "params": {"pattern": "#### (\\d+)"}}).kind \
        == "exact_match"
    with pytest.raises(GraderError, match="unknown grader kind"):
        get_grader({"kind": "nope"})


def test_rollout_is_lazy_and_registered():
    import sys

    grader = get_grader({"kind": "rollout", "env": {"kind": "textworld", "max_steps": 3}})
    assert grader.kind == "rollout"
    assert "a2c.runtime.envs.rollout_grader" in sys.modules
