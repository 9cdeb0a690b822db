"""ref-grpo spends its budget: GRPO stages, each submitted, until the time (less the submit
margin) or the submissions run out; rl-only never starts the SFT warm-up (fast, no model)."""

from __future__ import annotations

import json
import time

import pytest

from a2c.agents.kit import grading, training
from a2c.agents.reference import grpo


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(
        json.dumps({"id": "1", "prompt": "What is 1 plus 2?", "answer": "3"}) + "\n")
    (tmp_path / "run_meta.json").write_text(json.dumps({"budget": {"max_submissions": 4}}))
    for key, value in {"A2C_WORKSPACE": tmp_path, "A2C_DATA_DIR": tmp_path / "data",
                       "A2C_BASE_MODEL": tmp_path / "base", "A2C_OUTPUT_DIR": tmp_path / "out",
                       "A2C_SEED": "0"}.items():
        monkeypatch.setenv(key, str(value))
    for key in ("A2C_AGENT_DIR", "A2C_AGENT_PARAMS"):   # the declared defaults: generated/
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def _fake(monkeypatch, stage_seconds: float):
    calls = {"stages": [], "submits": [], "warmups": 0}

    class Model:
        def parameters(self):
            import torch
            return [torch.nn.Parameter(torch.zeros(1))]

    def fake_train(ctx, model, tokenizer, records, steps, tag, stop_at=None, optimizer=None,
                   seed=None, lr=None):
        calls["stages"].append((tag, lr))
        time.sleep(stage_seconds)
        return model, steps, [0.1]

    monkeypatch.setattr(training, "load_model", lambda path: (Model(), None))
    monkeypatch.setattr(training, "save_model", lambda m, t, out: out)
    monkeypatch.setattr(training, "set_threads", lambda threads=0: None)
    monkeypatch.setattr(grading, "wait_score", lambda ctx, sid, timeout=None: {})
    monkeypatch.setattr(grading, "submit", lambda ctx, out, note="": calls["submits"].append(
        (out.name, note)) or str(len(calls["submits"])))
    monkeypatch.setattr(grpo, "train_grpo", fake_train)
    monkeypatch.setattr(grpo, "warm_up", lambda ctx: calls.__setitem__(
        "warmups", calls["warmups"] + 1))
    return calls


def test_rl_only_trains_in_submitted_stages_until_the_submissions_run_out(workspace,
                                                                           monkeypatch):
    monkeypatch.setenv("A2C_MODE", "rl-only")
    monkeypatch.setenv("A2C_DEADLINE", str(time.time() + 3600))
    calls = _fake(monkeypatch, 0.0)
    assert grpo.main([]) == 0
    assert calls["warmups"] == 0
    assert [s[0] for s in calls["submits"]] == ["grpo-1", "grpo-2", "grpo-3", "grpo-4"]
    assert all(lr == 2e-5 for _, lr in calls["stages"])      # from the base model
    assert "4 steps" not in calls["submits"][0][1] and "20 steps" in calls["submits"][0][1]


def test_stages_stop_before_the_deadline(workspace, monkeypatch):
    monkeypatch.setenv("A2C_MODE", "rl-only")
    monkeypatch.setenv("A2C_DEADLINE", str(time.time() + 15 + 22.5))   # margin 15 s
    calls = _fake(monkeypatch, 1.5)
    assert grpo.main([]) == 0
    # 22.5 s usable, a stage takes 1.5 s and starts only with 20 s left: about two stages, not
    # the four the submissions would allow
    assert 1 <= len(calls["stages"]) <= 3 and len(calls["submits"]) == len(calls["stages"])


def test_free_mode_warms_up_first(workspace, monkeypatch):
    monkeypatch.setenv("A2C_MODE", "free")
    monkeypatch.setenv("A2C_DEADLINE", str(time.time() + 3600))
    monkeypatch.setenv("A2C_AGENT_PARAMS", json.dumps({"stages": 1}))   # ref-grpo's param
    calls = _fake(monkeypatch, 0.0)
    assert grpo.main([]) == 0
    assert calls["warmups"] == 1 and len(calls["stages"]) == 1
