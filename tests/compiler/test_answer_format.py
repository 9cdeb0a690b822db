"""The answer format, stated once in the grader: derived from the pattern where unambiguous,
round-tripped against the gold answers at compile time, rendered for the agent."""

from __future__ import annotations

import json
import textwrap

import pytest

from a2c.answer_format import derive, round_trip
from a2c.compiler.build import build_specs
from a2c.errors import SpecError


@pytest.mark.parametrize("pattern, fmt", [
    (r"####\s*(-?[\d,.]+)", "#### {answer}"),
    (r"Answer:\s*([A-Za-z]+)", "Answer: {answer}"),
    (r"^Answer: (\w+)\s*$", "Answer: {answer}"),
    (r"\\boxed\{(.+?)\}", r"\boxed{{answer}}"),
    (r"answer is (\d+)\.", "answer is {answer}."),
    (r"(-?\d+)", "{answer}"),
    (r"(?:Answer|Final):\s*(\w+)", None),      # alternation before the answer: say it
    (r"[Aa]nswer: (\w+)", None),
    (r"Answers?: (\w+)", None),
])
def test_derive(pattern, fmt):
    assert derive(pattern) == fmt


def test_round_trip_reads_back_or_says_what_it_read():
    ok, target, got = round_trip("Answer: {answer}", "New York", pattern=r"Answer:\s*([A-Za-z]+)",
                                 answer_pattern=None, normalize_mode="none")
    assert (ok, target, got) == (False, "Answer: New York", "New")
    assert round_trip("#### {answer}", "so 3 + 4 = 7\n#### 7", pattern=r"####\s*(-?[\d,.]+)",
                      answer_pattern=None)[:2] == (True, "#### 7")


def _task(tmp_path, params: str, answers=("Paris", "Rome")):
    tasks = tmp_path / "specs" / "tasks"
    (tasks / "data").mkdir(parents=True)
    for split, answer in zip(("train", "test"), answers):
        (tasks / "data" / f"{split}.jsonl").write_text(
            json.dumps({"id": split, "q": "Capital?", "a": answer}) + "\n")
    (tasks / "caps.yaml").write_text(textwrap.dedent("""\
        apiVersion: a2c/v1
        kind: Task
        id: caps
        title: Capitals
        level: 1
        description: Capitals.
        base_model: {builtin: tiny}
        data:
          source: {files: {train: data/train.jsonl, test: data/test.jsonl}}
          agent: {split: train}
          heldout: {split: test}
          fields: {id: id, prompt: q, answer: a}
        grader:
          kind: exact_match
          params: %s
        """) % params)
    return tasks / "caps.yaml"


def test_derived_format_reaches_instructions_run_meta_and_grader(tmp_path):
    spec = _task(tmp_path, r"{pattern: 'Answer:\s*([A-Za-z]+)', normalize: none}")
    [bundle] = build_specs([spec], tmp_path / "out")
    grader = json.loads((bundle / "grader" / "grader.json").read_text())
    assert grader["params"]["answer_format"] == "Answer: {answer}"
    meta = json.loads((bundle / "workspace" / "run_meta.json").read_text())
    assert meta["task"]["answer_format"] == "Answer: {answer}"
    assert meta["task"]["grader_params"]["normalize"] == "none"
    text = (bundle / "workspace" / "INSTRUCTIONS.md").read_text()
    assert "```\nAnswer: {answer}\n```" in text and "case and spelling count" in text


def test_declared_format_wins(tmp_path):
    spec = _task(tmp_path, r"{pattern: '(?:Answer|Final):\s*([A-Za-z]+)', "
                           r"answer_format: 'Final: {answer}'}")
    [bundle] = build_specs([spec], tmp_path / "out")
    meta = json.loads((bundle / "workspace" / "run_meta.json").read_text())
    assert meta["task"]["answer_format"] == "Final: {answer}"


def test_compile_refuses_a_pattern_that_cannot_read_its_gold(tmp_path):
    spec = _task(tmp_path, r"{pattern: 'Answer:\s*([A-Za-z]+)'}", answers=("Paris", "New York"))
    with pytest.raises(SpecError) as info:
        build_specs([spec], tmp_path / "out")
    [problem] = info.value.problems
    assert "caps.yaml:" in problem and "grader.params.pattern" in problem
    assert "'Answer: New York' -> 'New' (record 'test' of data/test.jsonl; 1 of 2" in problem
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("params, says", [
    (r"{pattern: '[Aa]nswer:\s*(\w+)'}", "cannot be derived from the pattern"),
    (r"{pattern: 'A:\s*(\w+)', answer_format: 'A: {answer} {answer}'}", "exactly once"),
    (r"{pattern: 'A:\s*(\w+)', answer_format: 'A: <answer>'}", "answer_format"),   # schema
    (r"{pattern: '####\s*(\d+)', answer_format: 'Answer: {answer}'}", "-> no match"),
])
def test_compile_refuses_a_bad_format(tmp_path, params, says):
    with pytest.raises(SpecError) as info:
        build_specs([_task(tmp_path, params, answers=("7", "8"))], tmp_path / "out")
    assert any(says in p for p in info.value.problems), info.value.problems
