"""The reference agents train on and reward the task's declared answer format (run_meta.json
`task.answer_format` + the grader's extraction), never the arithmetic task's `#### N` default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2c.agents.kit import answers, context
from a2c.agents.reference.grpo import make_reward
from a2c.paths import project_root

CAPITALS = {"answer_format": "Answer: {answer}", "answer_pattern": r"Answer:\s*([A-Za-z]+)",
            "grader": "exact_match",
            "grader_params": {"pattern": r"Answer:\s*([A-Za-z]+)", "fallback": "none",
                              "normalize": "none", "match": "first",
                              "answer_format": "Answer: {answer}"}}


@pytest.fixture
def capitals():
    return answers.AnswerFormat.from_task(CAPITALS)


def test_text_target_is_the_declared_format(capitals):
    record = {"id": "1", "prompt": "Write the code word lufesa in capital letters.",
              "answer": "LUFESA"}
    assert answers.completion_for(record, capitals) == "Answer: LUFESA"
    assert capitals.correct("Answer: LUFESA", "LUFESA")
    assert not capitals.correct("Answer: lufesa", "LUFESA")        # normalize: none
    assert not capitals.correct("#### LUFESA", "LUFESA")            # the old, wrong format


def test_worked_solutions_are_kept_when_the_grader_reads_them():
    gsm8k = answers.AnswerFormat.from_task({
        "answer_format": "#### {answer}",
        "grader_params": {"pattern": r"####\s*(-?[\d,.]+)", "fallback": "last_number",
                          "normalize": "number"}})
    worked = "She had 3 + 4 = 7 apples.\n#### 7"
    assert answers.completion_for({"prompt": "q", "answer": worked}, gsm8k) == worked
    assert answers.completion_for({"prompt": "q", "answer": "7", "solution": "3 + 4"}, gsm8k) \
        == "3 + 4\n#### 7"


def test_a_solution_that_misses_the_format_gets_it_appended(capitals):
    record = {"prompt": "p", "answer": "ROME", "solution": "It is on the Tiber."}
    assert answers.completion_for(record, capitals) == "It is on the Tiber.\nAnswer: ROME"


def test_reward_is_the_graders_verdict_in_the_task_format(capitals):
    reward = make_reward(capitals)
    completions = [[{"role": "assistant", "content": "Answer: PARIS"}],
                   [{"role": "assistant", "content": "Answer: Paris"}],
                   [{"role": "assistant", "content": "#### PARIS"}]]
    assert reward(completions=completions, answer=["PARIS"] * 3) == [1.1, 0.1, 0.0]


def test_the_shipped_arith_bundle_states_its_format():
    meta = json.loads((project_root() / "generated" / "arith" / "workspace" /
                       "run_meta.json").read_text())
    fmt = answers.AnswerFormat.from_task(meta["task"])
    assert fmt.template == "#### {answer}"
    record = {"prompt": "What is 12 plus 34?", "answer": "46"}
    assert answers.completion_for(record, fmt) == "12 + 34 = 46\n#### 46"


def test_sft_dataset_uses_the_workspace_format(tmp_path, monkeypatch):
    from a2c.agents.reference.sft import build_dataset
    (tmp_path / "data").mkdir()
    (tmp_path / "run_meta.json").write_text(json.dumps({"task": {
        **CAPITALS, "prompt_template": "{prompt}\nReply with 'Answer: <WORD>'."}}))
    monkeypatch.setenv("A2C_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("A2C_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("A2C_BASE_MODEL", str(Path(tmp_path) / "model"))
    ctx = context.AgentContext.from_env()
    rows = build_dataset(ctx, [{"id": "1", "prompt": "Write rome in capitals.",
                                "answer": "ROME"}], chat=True)
    assert rows[0]["completion"] == [{"role": "assistant", "content": "Answer: ROME"}]
    assert rows[0]["prompt"][0]["content"].endswith("Reply with 'Answer: <WORD>'.")
