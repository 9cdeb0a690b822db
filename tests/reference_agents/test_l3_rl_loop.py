"""ref-l3-rl's loop with the model, engine and environment faked (fast): rl-only never warms up,
a model is submitted when its greedy success on the training games beats the best so far, the
loop stops before the deadline, free mode starts from the warm-up's model."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from a2c.agents.kit import episodes, grading, training
from a2c.agents.reference import l3_arena, l3_rl
from a2c.contracts.spec import RolloutEnvSpec


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    (tmp_path / "l3").mkdir()
    (tmp_path / "l3" / "env.json").write_text(json.dumps({
        "kind": "textworld", "max_steps": 4, "history": {"max_tokens": 512},
        "options": {"dtype": "bfloat16"}, "score_by": "success",
        "inference": {"max_new_tokens": 16, "temperature": 0.0, "stop": ["\n"]}}))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(
        "".join(json.dumps({"id": f"g{i}", "game_file": f"games/g{i}.z8"}) + "\n"
                for i in range(4)))
    (tmp_path / "run_meta.json").write_text(json.dumps({"budget": {"max_submissions": 5}}))
    for key, value in {"A2C_WORKSPACE": tmp_path, "A2C_DATA_DIR": tmp_path / "data",
                       "A2C_BASE_MODEL": tmp_path / "base", "A2C_OUTPUT_DIR": tmp_path / "out",
                       "A2C_SEED": "0"}.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.delenv("A2C_AGENT_DIR", raising=False)   # the declared defaults: generated/
    set_params(monkeypatch, check_every=1, group=2)
    return tmp_path


def set_params(monkeypatch, **values):
    """The agent's params as the runtime hands them over (`A2C_AGENT_PARAMS`), merged."""
    given = json.loads(os.environ.get("A2C_AGENT_PARAMS") or "{}")
    monkeypatch.setenv("A2C_AGENT_PARAMS", json.dumps({**given, **values}))


def _fake(monkeypatch, checks: list[float], iteration_s: float = 0.0,
          valid_steps: tuple[bool, ...] = (True, True)):
    calls = {"submits": [], "updates": 0, "warmups": 0, "start": None, "bonuses": []}

    class FakePolicy:
        explored = 0          # steps that took a random listed action instead of the model's

        def __init__(self, model_dir, options):
            calls["start"] = Path(model_dir).name
            self.backend = type("B", (), {"close": lambda self: None})()

        def sync(self, model):
            pass

    def play_groups(arena, policy, games, group, temperature, seed, bonus=0.0, explore=0.0):
        time.sleep(iteration_s)
        calls["bonuses"].append(bonus)
        played = [episodes.Played(str(g["id"]), [[{"role": "user", "content": g["id"]}]],
                                  ["x", "y"], float(k == 0), won=k == 0,
                                  score=float(k == 0), valid=list(valid_steps))
                  for g in games for k in range(group)]
        # the exploration took the first step of every episode
        policy.explored = len(played)
        return played

    def update(model, tokenizer, played, groups, optimizer, **kwargs):
        calls["updates"] += 1
        return {"seconds": 0.01, "sequences": sum(len(v) for v in groups.values())}

    monkeypatch.setattr(l3_rl, "Arena", lambda ws, data: type("A", (), {
        "env": RolloutEnvSpec(kind="textworld"), "fmt": None})())
    monkeypatch.setattr(l3_rl, "Policy", FakePolicy)
    monkeypatch.setattr(l3_rl, "play_groups", play_groups)
    scores = iter(checks)
    monkeypatch.setattr(l3_rl, "greedy_success", lambda arena, policy, games: next(scores))
    monkeypatch.setattr(l3_rl, "load_trainable", lambda path: (
        __import__("torch").nn.Linear(1, 1), None))
    monkeypatch.setattr(l3_rl, "warm_up", lambda ctx: calls.__setitem__(
        "warmups", calls["warmups"] + 1) or ctx.output_dir / "l3-sft")
    monkeypatch.setattr(training, "set_threads", lambda threads=0: None)
    monkeypatch.setattr(training, "save_model", lambda m, t, out: out)
    monkeypatch.setattr(grading, "wait_score", lambda ctx, sid, timeout=None: {})
    monkeypatch.setattr(grading, "submit", lambda ctx, out, note="": calls["submits"].append(
        (out.name, note)) or str(len(calls["submits"])))
    return calls, update


def test_rl_only_submits_when_the_greedy_training_success_improves(workspace, monkeypatch):
    monkeypatch.setenv("A2C_MODE", "rl-only")
    monkeypatch.setenv("A2C_DEADLINE", str(time.time() + 3600))
    set_params(monkeypatch, max_iters=4)
    calls, update = _fake(monkeypatch, [0.0, 25.0, 25.0, 50.0])
    assert l3_rl.main([], update=update) == 0
    assert calls["warmups"] == 0 and calls["start"] == "base" and calls["updates"] == 4
    # improved at iterations 2 and 4; the last one was submitted, so no extra final submission
    assert [s[0] for s in calls["submits"]] == ["l3-rl-2", "l3-rl-4"]
    assert "from online rollouts" in calls["submits"][0][1]
    history = json.loads((workspace / "tmp" / "l3-rl-history.json").read_text())
    assert [h["informative_games"] for h in history] == [4, 4, 4, 4]


def test_the_loop_stops_before_the_deadline_and_submits_its_last_model(workspace, monkeypatch):
    monkeypatch.setenv("A2C_MODE", "rl-only")
    # margin 15 s; the loop keeps 10 s more (or 1.3 x a recent iteration) in hand
    monkeypatch.setenv("A2C_DEADLINE", str(time.time() + 15 + 12.0))
    calls, update = _fake(monkeypatch, [0.0] * 50, iteration_s=0.5)
    started = time.time()
    assert l3_rl.main([], update=update) == 0
    assert time.time() - started < 4.5
    assert 2 <= calls["updates"] <= 6
    assert [s[0] for s in calls["submits"]] == [f"l3-rl-{calls['updates']}"]   # the final one


def test_free_mode_starts_from_the_warm_up(workspace, monkeypatch):
    monkeypatch.setenv("A2C_MODE", "free")
    monkeypatch.setenv("A2C_DEADLINE", str(time.time() + 3600))
    set_params(monkeypatch, max_iters=1)
    calls, update = _fake(monkeypatch, [50.0, 75.0])
    assert l3_rl.main([], update=update) == 0
    assert calls["warmups"] == 1 and calls["start"] == "l3-sft"
    assert "after the warm-up" in calls["submits"][0][1]


def test_own_valid_share_leaves_the_explored_steps_out():
    played = [episodes.Played("g", [], [], 0.0, valid=[True, False]),
              episodes.Played("g", [], [], 0.0, valid=[True, True])]
    # 4 steps, 2 of them explored (valid by construction): the model's own 2 steps, 1 valid
    assert l3_arena.own_valid_share(played, explored=2) == 0.5
    assert l3_arena.own_valid_share(played, explored=0) == 0.75
    assert l3_arena.own_valid_share(played, explored=4) == 0.0      # no step of its own


@pytest.mark.parametrize("valid_steps, bonus_ends", [((True, True), True),
                                                     ((True, False), False)])
def test_the_valid_bonus_ends_once_the_models_own_actions_are_valid(
        workspace, monkeypatch, valid_steps, bonus_ends):
    monkeypatch.setenv("A2C_MODE", "rl-only")
    monkeypatch.setenv("A2C_DEADLINE", str(time.time() + 3600))
    set_params(monkeypatch, max_iters=3, valid_bonus=0.1)
    calls, update = _fake(monkeypatch, [0.0] * 3, valid_steps=valid_steps)
    assert l3_rl.main([], update=update) == 0
    # every episode's second step is the model's own: valid (100 % >= 80 %) or not (0 %)
    assert calls["bonuses"] == ([0.1, 0.0, 0.0] if bonus_ends else [0.1, 0.1, 0.1])
    history = json.loads((workspace / "tmp" / "l3-rl-history.json").read_text())
    assert [h["own_valid_actions"] for h in history] == [100.0 if bonus_ends else 0.0] * 3
