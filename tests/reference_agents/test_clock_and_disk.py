"""Issue 25: the scripted recipe's trainer and the reference agents respect the clock, log the
hyperparameters that actually ran, and keep one submitted model in their output folder."""

from __future__ import annotations

import json
import types
from pathlib import Path

import yaml

from a2c.agents.kit import context, grading

ROOT = Path(__file__).resolve().parents[2]


def _recipe_module():
    spec = yaml.safe_load((ROOT / "specs" / "drivers" / "sft-recipe.yaml").read_text())
    source = next(t for t in spec["turns"] if t["id"] == "write-trainer")["write"]["content"]
    module = types.ModuleType("train_sft")
    exec(compile(source, "train_sft.py", "exec"), module.__dict__)
    return module, source


def test_recipe_stops_training_before_the_deadline(monkeypatch):
    recipe, source = _recipe_module()
    assert "callbacks=[clock]" in source and "hyperparameters.json" in source
    now = [1000.0]
    monkeypatch.setattr(recipe.time, "time", lambda: now[0])
    clock = recipe.clock_callback(stop_at=1100.0)
    state = types.SimpleNamespace(global_step=0)
    control = types.SimpleNamespace(should_training_stop=False)
    steps = 0
    while not control.should_training_stop and steps < 25:   # 25 planned steps of 10 s
        clock.on_step_begin(None, state, control)
        now[0] += 10.0
        steps += 1
        state.global_step = steps
        clock.on_step_end(None, state, control)
    assert clock.stopped and steps < 25
    assert now[0] + 10.0 <= 1100.0 + 10.0   # no step was started that would end past stop_at
    assert recipe.deadline({"deadline": 1234.5}) == 1234.5


def test_recipe_deadline_from_the_environment(monkeypatch):
    recipe, _ = _recipe_module()
    monkeypatch.setenv("A2C_DEADLINE", "99.0")
    assert recipe.deadline({}) == 99.0
    monkeypatch.delenv("A2C_DEADLINE")
    assert recipe.deadline({}) is None


def _ctx(tmp_path: Path) -> context.AgentContext:
    (tmp_path / "output").mkdir()
    return context.AgentContext(workspace=tmp_path, output_dir=tmp_path / "output",
                               data_dir=tmp_path, base_model=tmp_path, mode="free", seed=0,
                               deadline=0.0)


def test_hyperparameters_are_the_values_that_ran(tmp_path, monkeypatch):
    monkeypatch.setenv("A2C_WORKSPACE", str(tmp_path))   # the transcript: tmp_path/.a2c/
    ctx = _ctx(tmp_path)
    grading.record_hyperparameters(ctx, method="SFT", steps=4, max_steps=25, learning_rate=5e-5,
                                  batch_size=8, stopped_by_clock=True)
    data = json.loads((tmp_path / "hyperparameters.json").read_text())
    assert data == {"method": "SFT", "steps": 4, "max_steps": 25, "learning_rate": 5e-5,
                    "batch_size": 8, "stopped_by_clock": True}


def test_submit_releases_the_earlier_submitted_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("A2C_WORKSPACE", str(tmp_path))   # the transcript: tmp_path/.a2c/
    monkeypatch.setattr(grading, "_SUBMITTED", [])
    ctx = _ctx(tmp_path)
    replies = iter([(0, {"id": 1}), (1, {"error": "too_soon"}), (0, {"id": 2})])
    monkeypatch.setattr(grading, "client", lambda *a, **k: next(replies))
    folders = [ctx.output_dir / f"sft-stage{i}" for i in (1, 2, 3)]
    for f in folders:
        f.mkdir()
    warm = ctx.output_dir / "warm-up"
    warm.mkdir()
    grading.remember_submitted(warm)
    assert grading.submit(ctx, folders[0]) == "1"
    assert not warm.exists() and folders[0].exists()
    assert grading.submit(ctx, folders[1]) is None          # refused: nothing is removed
    assert folders[0].exists() and folders[1].exists()
    assert grading.submit(ctx, folders[2]) == "2"
    assert not folders[0].exists() and folders[2].exists()
    assert folders[1].exists()       # never submitted: the agent's own business
