import json

import numpy as np
import pytest

from a2c.runtime.graders import GraderError, get_grader
from a2c.runtime.graders.judge import JudgeConfigError, load_judge_config, parse_verdict
from a2c.runtime.graders.lc import _sigmoid, length_controlled_winrate

SPEC = {"kind": "pairwise_judge",
        "params": {"judge_model": "gpt-4-1106-preview", "reference_field": "answer",
                   "swap_positions": True, "length_controlled": True, "max_retries": 3,
                   "max_failure_rate": 0.1}}


def grader(**params):
    cfg = json.loads(json.dumps(SPEC))
    cfg["params"].update({"backoff_s": 0.01, "max_backoff_s": 0.05, **params})
    return get_grader(cfg)


def better(records):
    """Outputs the fake (length-loving) judge prefers: the reference plus more detail."""
    return {r["id"]: r["answer"] + " In more detail: " + r["answer"] for r in records}


def worse(records):
    return {r["id"]: r["answer"][: max(1, len(r["answer"]) // 4)] for r in records}


def test_both_orders_are_judged_and_win_rates(fake_judge, alpaca_records):
    res = grader().grade_predictions(better(alpaca_records), alpaca_records)
    assert res.score == 100.0 and res.metrics["win_rate"] == 100.0
    reqs = fake_judge.completions()
    assert len(reqs) == 2 * len(alpaca_records)
    # every instruction was shown with the model's output once in each position
    seen = {}
    for r in reqs:
        content = r["body"]["messages"][-1]["content"]
        seen.setdefault(content.split("## Answer A")[0], []).append(content)
    assert all(len(v) == 2 for v in seen.values())
    assert reqs[0]["auth"] == "Bearer test-key" and reqs[0]["body"]["model"] == "fake-judge"
    item = res.items[0]
    assert {j["order"] for j in item["judgments"]} == {"reference_first", "model_first"}
    assert item["gold"] == alpaca_records[0]["answer"] and item["correct"]
    assert res.metrics["tokens"]["total"] == 101 * len(reqs)
    assert res.metrics["judge"]["model"] == "fake-judge"
    assert res.metrics["spec_judge_model"] == "gpt-4-1106-preview"
    assert "test-key" not in json.dumps(res.to_dict())

    res = grader().grade_predictions(worse(alpaca_records), alpaca_records)
    assert res.score == 0.0 and res.metrics["n_losses"] == len(alpaca_records)


def test_reference_as_prediction_ties_at_50_without_judge_calls(fake_judge, alpaca_records):
    res = grader().grade_predictions({r["id"]: r["answer"] for r in alpaca_records},
                                     alpaca_records)
    assert res.score == 50.0 and res.metrics["n_identical"] == len(alpaca_records)
    assert fake_judge.completions() == []


def test_position_bias_cancels(fake_judge, alpaca_records):
    fake_judge.policy = lambda ins, a, b: "A"      # always prefers the first answer
    res = grader().grade_predictions(better(alpaca_records), alpaca_records)
    assert res.score == 50.0 and res.metrics["n_ties"] == len(alpaca_records)
    res1 = grader(swap_positions=False, cache=False).grade_predictions(
        better(alpaca_records), alpaca_records)
    assert 0.0 < res1.score < 100.0                # one order per item: biased either way


def test_retries_with_backoff(fake_judge, alpaca_records):
    fake_judge.rate_limit_first = 2
    fake_judge.fail_first = 2
    res = grader(concurrency=1, max_retries=4).grade_predictions(better(alpaca_records),
                                                               alpaca_records)
    assert res.score == 100.0 and res.metrics["judge_failures"] == 0
    assert len(fake_judge.completions()) == 2 * len(alpaca_records) + 4
    assert res.items[0]["judgments"][0]["attempts"] == 5


def test_failures_are_counted_not_losses_and_mark_unreliable(fake_judge, alpaca_records):
    fake_judge.fail_marker = "capital of Australia"
    res = grader().grade_predictions(better(alpaca_records), alpaca_records)
    assert res.metrics["judge_failures"] == 2 and res.metrics["judge_failed_items"] == 1
    assert res.score == 100.0                      # the failed item is left out, not lost
    assert res.metrics["n_scored"] == len(alpaca_records) - 1
    failed = next(it for it in res.items if it.get("excluded"))
    assert failed["error"].startswith("judge failed") and failed["preference"] is None
    # 4 attempts per failed call (max_retries 3)
    assert len(fake_judge.completions()) == 2 * (len(alpaca_records) - 1) + 2 * 4
    assert not res.valid and "unreliable" in res.error     # 2/16 > 10%
    ok = grader(max_failure_rate=0.2, cache=False).grade_predictions(
        better(alpaca_records), alpaca_records)
    assert ok.valid and ok.metrics["reliable"]


def test_unparseable_replies_are_failures(fake_judge, alpaca_records):
    fake_judge.garbage = True
    res = grader(max_retries=1).grade_predictions(better(alpaca_records), alpaca_records)
    assert res.metrics["judge_failed_items"] == len(alpaca_records)
    assert not res.valid and res.metrics["n_scored"] == 0


def test_cache_avoids_second_calls(fake_judge, alpaca_records, tmp_path):
    preds = better(alpaca_records)
    first = grader().grade_predictions(preds, alpaca_records)
    n = len(fake_judge.completions())
    second = grader().grade_predictions(preds, alpaca_records)
    assert len(fake_judge.completions()) == n
    assert second.score == first.score and second.metrics["judge_cached"] == n
    assert second.metrics["tokens"]["total"] == 0 and second.metrics["cost"] == 0
    # a different output is a different key
    preds[alpaca_records[0]["id"]] += "!"
    grader().grade_predictions(preds, alpaca_records)
    assert len(fake_judge.completions()) == n + 2


def test_weighted_verdicts_use_logprobs(fake_judge, alpaca_records):
    fake_judge.logprobs = 0.8
    res = grader().grade_predictions(better(alpaca_records), alpaca_records)
    assert res.score == pytest.approx(80.0)
    assert res.items[0]["judgments"][0]["p_model"] == pytest.approx(0.8)
    fake_judge.requests.clear()
    res = grader(weighted=False, cache=False).grade_predictions(better(alpaca_records),
                                                                alpaca_records)
    assert res.score == 100.0
    assert "logprobs" not in fake_judge.completions()[0]["body"]


def test_missing_prediction_is_a_loss_not_a_judge_failure(fake_judge, alpaca_records):
    preds = better(alpaca_records)
    del preds[alpaca_records[0]["id"]]
    res = grader().grade_predictions(preds, alpaca_records)
    assert res.metrics["n_missing"] == 1 and res.metrics["judge_failures"] == 0
    assert res.score == pytest.approx(100 * 7 / 8)


def test_cost_from_configured_prices(fake_judge, alpaca_records, monkeypatch):
    monkeypatch.setenv("A2C_JUDGE_PRICE_PROMPT_PER_1K", "0.01")
    monkeypatch.setenv("A2C_JUDGE_PRICE_COMPLETION_PER_1K", "0.03")
    res = grader().grade_predictions(better(alpaca_records), alpaca_records)
    calls = 2 * len(alpaca_records)
    assert res.metrics["cost"] == pytest.approx(calls * (100 * 0.01 + 1 * 0.03) / 1000)


def test_bad_credentials_are_a_clear_error(fake_judge, alpaca_records):
    fake_judge.status = 401
    with pytest.raises(JudgeConfigError, match="refused the credentials"):
        grader().grade_predictions(better(alpaca_records), alpaca_records)


def test_unreachable_endpoint_counts_failures(monkeypatch, alpaca_records, tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                       # nothing listens there
    monkeypatch.setenv("A2C_JUDGE_BASE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("A2C_JUDGE_MODEL", "m")
    monkeypatch.setenv("A2C_JUDGE_CACHE", str(tmp_path))
    res = grader(max_retries=1).grade_predictions(better(alpaca_records[:2]), alpaca_records[:2])
    assert res.metrics["judge_failures"] == 4 and not res.valid


def test_config_sources(tmp_path, monkeypatch):
    with pytest.raises(JudgeConfigError, match="A2C_JUDGE_BASE_URL"):
        load_judge_config({})
    with pytest.raises(JudgeConfigError):
        load_judge_config({}, default_model="spec-model")     # still no endpoint
    f = tmp_path / "judge.yaml"
    f.write_text("base_url: http://127.0.0.1:9/v1\nmodel: from-file\napi_key_env: MY_KEY\n"
                 "price_prompt_per_1k: 0.5\n")
    cfg = load_judge_config({"A2C_JUDGE_CONFIG": str(f), "MY_KEY": "k"})
    assert (cfg.base_url, cfg.model, cfg.api_key, cfg.price_prompt_per_1k) == \
        ("http://127.0.0.1:9/v1", "from-file", "k", 0.5)
    assert cfg.endpoint == "http://127.0.0.1:9/v1/chat/completions"
    cfg = load_judge_config({"A2C_JUDGE_CONFIG": str(f), "A2C_JUDGE_MODEL": "env-model"})
    assert cfg.model == "env-model"
    cfg = load_judge_config({"A2C_JUDGE_BASE_URL": "http://h:1"}, default_model="spec-model")
    assert cfg.model == "spec-model" and cfg.endpoint == "http://h:1/v1/chat/completions"
    assert "api_key" not in cfg.public()
    with pytest.raises(JudgeConfigError, match="no such file"):
        load_judge_config({"A2C_JUDGE_CONFIG": str(tmp_path / "nope.json")})


def test_endpoint_and_key_never_from_the_spec():
    with pytest.raises(GraderError, match="must not be in the spec"):
        get_grader({"kind": "pairwise_judge", "params": {"judge_model": "x",
                                                          "base_url": "http://evil"}})


def test_missing_judge_fails_fast(monkeypatch, alpaca_records):
    for k in ("A2C_JUDGE_BASE_URL", "A2C_JUDGE_MODEL", "A2C_JUDGE_API_KEY", "A2C_JUDGE_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(JudgeConfigError, match="no judge configured"):
        grader().grade_predictions({}, alpaca_records)


@pytest.mark.parametrize("reply, verdict", [("A", "A"), ("B", "B"), ("(B)", "B"),
                                            ("Answer A", "A"), ("**B**", "B"),
                                            ("Answer B is better.", "B"), ("neither", None)])
def test_parse_verdict(reply, verdict):
    assert parse_verdict(reply) == verdict


def test_length_controlled_win_rate_removes_a_length_bias():
    rng = np.random.default_rng(0)
    n = 2000
    len_model = rng.normal(1500, 400, n).clip(10)
    len_base = rng.normal(1000, 300, n).clip(10)
    delta = len_base - len_model
    p = _sigmoid(-3.0 * np.tanh(delta / delta.std()))      # no quality difference at all
    y = (rng.random(n) < p).astype(float)
    out = length_controlled_winrate(y, len_model, len_base)
    assert out.win_rate > 70
    assert 45 < out.lc_win_rate < 55
    assert out.coefficients["length"] < -2


def test_length_controlled_keeps_a_real_quality_difference():
    rng = np.random.default_rng(1)
    n = 2000
    lm, lb = rng.normal(1000, 300, n).clip(10), rng.normal(1000, 300, n).clip(10)
    y = (rng.random(n) < _sigmoid(np.full(n, 1.0))).astype(float)   # better, same lengths
    out = length_controlled_winrate(y, lm, lb)
    assert abs(out.lc_win_rate - out.win_rate) < 3 and out.lc_win_rate > 65


def test_length_controlled_with_instruction_difficulty():
    rng = np.random.default_rng(2)
    n = 1000
    lm, lb = rng.normal(1000, 300, n), rng.normal(1000, 300, n)
    gamma = rng.normal(0, 1, n)
    y = (rng.random(n) < _sigmoid(0.5 * gamma)).astype(float)
    out = length_controlled_winrate(y, lm, lb, instruction_difficulty=gamma)
    assert "instruction_difficulty" in out.coefficients
    assert out.coefficients["instruction_difficulty"] > 0.2
