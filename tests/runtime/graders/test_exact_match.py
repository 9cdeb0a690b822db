import pytest

from a2c.runtime.graders import GraderError, get_grader

GSM8K = {"kind": "exact_match",
         "params": {"pattern": r"####\s*(-?[\d,.]+)", "fallback": "last_number",
                    "normalize": "number"}}


@pytest.fixture
def grader():
    return get_grader(GSM8K)


@pytest.mark.parametrize("output, expected", [
    ("so 48+24=72\n#### 72", "72"),
    ("#### 1,234", "1234"),
    ("#### 3,750.", "3750"),
    ("#### 72.0", "72"),
    ("#### 6.50", "6.5"),
    ("#### -7", "-7"),
    ("#### -0", "0"),
    ("#### \u22127", "-7"),
    ("The answer is $10.", "10"),       # fallback: last number, $ and . stripped
    ("That is 40% of 30, so 18%", "18"),
    ("+5 is what I get", "5"),
    ("no number here", None),
    ("", None),
    ("#### 5\n#### 7", "5"),            # the first `#### N`, as the benchmark reads it
])
def test_extraction_and_normalisation(grader, output, expected):
    extracted, _ = grader.extract(output)
    assert grader.normalize(extracted) == expected


def test_gold_uses_the_pattern_on_gsm8k_answers(grader, gsm8k_records):
    golds = [grader.normalize(grader.gold_answer(r)) for r in gsm8k_records]
    assert golds == ["72", "3750", "6.5", "-7", "18", "624", "10", "4"]


def test_fallback_none_and_text_mode():
    g = get_grader({"kind": "exact_match", "params": {"pattern": r"####\s*(\S+)",
                                                      "fallback": "none", "normalize": "text"}})
    assert g.extract("the answer is 5")[0] is None
    assert g.normalize("  Paris ") == g.normalize("paris")
    raw = get_grader({"kind": "exact_match", "params": {"pattern": r"####\s*(\S+)",
                                                        "normalize": "none"}})
    assert raw.normalize("1,000") == "1,000"


def test_bad_params():
    with pytest.raises(GraderError, match="not a valid regular expression"):
        get_grader({"kind": "exact_match", "params": {"pattern": "(("}})
    with pytest.raises(GraderError, match="fallback"):
        get_grader({"kind": "exact_match", "params": {"pattern": "x", "fallback": "first"}})


def test_gold_predictions_score_100_and_corrupted_0(grader, gsm8k_records):
    gold = {r["id"]: r["answer"] for r in gsm8k_records}   # the full rationale + #### N
    res = grader.grade_predictions(gold, gsm8k_records)
    assert res.score == 100.0 and res.ci95 == (100.0, 100.0) and res.n_items == 8
    assert res.metrics["accuracy"] == 100.0 and res.backend == "predictions"
    item = res.items[1]
    assert set(item) >= {"id", "prompt", "output", "extracted", "gold", "correct", "score",
                         "error"}
    assert item["extracted"] == "3750" and item["gold"] == "3750" and item["correct"]
    assert item["prompt"] == gsm8k_records[1]["prompt"] and item["output"] == gold["test-1"]

    corrupted = {r["id"]: r["answer"].rsplit("####", 1)[0] + "#### 99999"
                 for r in gsm8k_records}
    res = grader.grade_predictions(corrupted, gsm8k_records)
    assert res.score == 0.0 and not any(it["correct"] for it in res.items)


def test_missing_predictions_are_failures(grader, gsm8k_records):
    preds = {gsm8k_records[0]["id"]: "#### 72"}
    res = grader.grade_predictions(preds, gsm8k_records)
    assert res.score == pytest.approx(100 / 8)
    assert res.metrics["n_missing"] == 7
    assert res.items[1]["error"] == "missing prediction" and not res.items[1]["correct"]


class FakeBackend:
    name = "fake"
    calls: list = []  # noqa: RUF012 - a test double records its calls

    def __init__(self, answers):
        self.answers = answers

    def generate(self, prompts, settings):
        FakeBackend.calls.append((list(prompts), settings))
        return [self.answers.get(p, "") for p in prompts]

    def sample(self, prompts, settings, n):
        return [[self.answers.get(p, "")] * n for p in prompts]

    def close(self):
        pass


def test_grade_model_uses_one_batched_call_and_the_prompt_template(monkeypatch, gsm8k_records):
    from a2c.runtime import inference

    cfg = {**GSM8K, "inference": {"prompt_template": "Q: {prompt}\nA:", "max_new_tokens": 64,
                                  "stop": ["\n\n"]}}
    answers = {f"Q: {r['prompt']}\nA:": r["answer"] for r in gsm8k_records}
    FakeBackend.calls = []
    monkeypatch.setattr(inference, "load_engine",
                        lambda path, kind="auto": FakeBackend(answers))
    res = get_grader(cfg).grade_model("/nonexistent/model", gsm8k_records)
    assert len(FakeBackend.calls) == 1
    prompts, settings = FakeBackend.calls[0]
    assert len(prompts) == 8 and prompts[0].startswith("Q: Natalia")
    assert settings.max_new_tokens == 64 and settings.stop == ("\n\n",)
    assert res.score == 100.0 and res.backend == "fake"


def test_prompt_template_with_unknown_field(gsm8k_records):
    g = get_grader({**GSM8K, "inference": {"prompt_template": "{question}"}})
    with pytest.raises(GraderError, match="question"):
        g.grade_predictions({}, gsm8k_records)
