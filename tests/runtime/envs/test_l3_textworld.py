"""TextWorld adapter, lockstep rollouts, failures and the rollout grader on real TextWorld games."""

from __future__ import annotations

import time

import pytest

from a2c.runtime.envs.prompts import OMITTED, Turn, get_format
from a2c.runtime.envs.registry import env_factory
from a2c.runtime.envs.rollout import RolloutConfig, run_rollouts
from a2c.runtime.envs.rollout_grader import RolloutGrader
from a2c.runtime.envs.textworld.env import TextWorldEnv

ENV_CFG = {"kind": "textworld", "max_steps": 6, "history": {"max_tokens": 1024}}


def test_generator_splits_are_disjoint_and_files_exist(tw_games):
    root, splits = tw_games
    assert set(splits) == {"train", "test"}
    ids = [r["id"] for s in splits.values() for r in s]
    assert len(ids) == len(set(ids)) == 6
    sigs = {s: {(r["prompt"], tuple(r["walkthrough"])) for r in recs} for s, recs in splits.items()}
    assert not sigs["train"] & sigs["test"]
    for rec in splits["train"] + splits["test"]:
        assert (root / rec["game_file"]).is_file() and not rec["game_file"].startswith("/")
        assert rec["walkthrough"] and rec["answer"]


def test_generator_is_deterministic(tw_games, tmp_path):
    from a2c.runtime.envs.textworld.games import generate

    _, splits = tw_games
    again = generate({"splits": {"train": 3, "test": 3}}, 11, tmp_path)
    assert [r["walkthrough"] for r in again["test"]] == [r["walkthrough"] for r in splits["test"]]


def test_env_walkthrough_wins(tw_games):
    root, splits = tw_games
    rec = splits["train"][0]
    env = TextWorldEnv(root / rec["game_file"])
    obs, info = env.reset()
    assert obs and info["task"] and info["admissible_commands"]
    assert rec["walkthrough"][0] in info["admissible_commands"]
    done = False
    for a in rec["walkthrough"]:
        obs, reward, done, info = env.step(a)
    assert done and info["won"]
    env.close()


def test_lockstep_equals_one_at_a_time_and_batches(tw_games, oracle):
    root, splits = tw_games
    recs = splits["test"]
    fmt = get_format("textworld")
    factory = env_factory(ENV_CFG, root)
    cfg = RolloutConfig.from_env_cfg(ENV_CFG)
    p1 = oracle(recs)
    lock = run_rollouts(recs, factory, fmt, p1, cfg, lockstep=True)
    p2 = oracle(recs)
    single = run_rollouts(recs, factory, fmt, p2, cfg, lockstep=False)
    assert [e.to_dict() for e in lock] == [e.to_dict() for e in single]
    assert all(e.won for e in lock)
    assert p1.batch_sizes[0] == len(recs) and max(p2.batch_sizes) == 1
    assert len(p1.batch_sizes) < len(p2.batch_sizes)
    traj = lock[0].trajectory()
    assert [t["action"] for t in traj] == recs[0]["walkthrough"]
    assert traj[-1]["reward"] > 0 and traj[0]["observation"]


def test_bad_action_and_missing_game_fail_only_their_episode(tw_games, oracle):
    root, splits = tw_games
    recs = [dict(r) for r in splits["test"]]
    recs.append({**recs[0], "id": "missing", "game_file": "games/nope.z8", "prompt": "x"})
    policy = oracle(recs[:3], bad_ids={recs[1]["id"]})
    eps = run_rollouts(recs, env_factory(ENV_CFG, root), get_format("textworld"), policy,
                       RolloutConfig.from_env_cfg(ENV_CFG))
    assert eps[0].won and eps[2].won
    assert eps[1].failure.startswith("bad_action") and not eps[1].won
    assert eps[3].failure.startswith("env_crash") and "nope.z8" in eps[3].failure


def test_step_timeout_fails_the_episode(tw_games, oracle):
    root, splits = tw_games
    recs = splits["test"][:2]
    base = env_factory(ENV_CFG, root)

    class Slow:
        def __init__(self, env):
            self.env = env

        def reset(self):
            return self.env.reset()

        def step(self, a):
            time.sleep(2)
            return self.env.step(a)

        def close(self):
            self.env.close()

    def factory(rec):
        env = base(rec)
        return Slow(env) if rec["id"] == recs[0]["id"] else env

    cfg = RolloutConfig(max_steps=6, step_timeout_s=0.5)
    eps = run_rollouts(recs, factory, get_format("textworld"), oracle(recs), cfg)
    assert eps[0].failure.startswith("timeout") and eps[1].won


def test_max_steps_ends_unfinished_episodes(tw_games):
    root, splits = tw_games
    recs = splits["test"][:2]
    cfg = RolloutConfig(max_steps=3)
    eps = run_rollouts(recs, env_factory(ENV_CFG, root), get_format("textworld"),
                       lambda ps: ["look"] * len(ps), cfg)
    assert all(len(e.steps) == 3 and not e.won and e.failure is None for e in eps)
    assert eps[0].info["stopped"] == "max_steps"


def test_history_truncation_keeps_task_and_latest():
    fmt = get_format("textworld")
    turns = [Turn(f"action {i}", f"observation {i} " + "word " * 50) for i in range(30)]
    info = {"admissible_commands": ["look", "go north"]}
    full = fmt.messages("Find the key.", "You are in a room.", turns, info)
    cut = fmt.messages("Find the key.", "You are in a room.", turns, info, max_tokens=400,
                       keep_first_turns=1)
    assert len(cut) < len(full)
    assert cut[0] == full[0] and cut[1] == full[1]            # system, task
    assert cut[2]["content"] == "action 0"                       # keep_first_turns
    assert cut[-1] == full[-1] and "Valid actions: look, go north" in cut[-1]["content"]
    assert any(OMITTED in m["content"] for m in cut)
    roles = [m["role"] for m in cut[1:]]
    assert all(a != b for a, b in zip(roles, roles[1:]))       # still alternates
    tiny = fmt.messages("Find the key.", "You are in a room.", turns, info, max_tokens=10)
    assert tiny[-1]["content"].endswith(full[-1]["content"])     # never raises, keeps latest
    assert len(tiny) == 4


def test_rollout_grader_scores_and_keeps_trajectories(tw_games, oracle):
    root, splits = tw_games
    recs = splits["test"]
    grader = RolloutGrader({"kind": "rollout", "env": {**ENV_CFG, "data_root": str(root)},
                            "inference": {"max_new_tokens": 16}})
    res = grader.grade_policy(oracle(recs, bad_ids={recs[0]["id"]}), recs)
    assert res.n_items == 3 and abs(res.score - 200 / 3) < 1e-6
    assert res.metrics["failures"]["bad_action"] == 1 and res.grader == "rollout"
    assert 0 <= res.ci95[0] <= res.score <= res.ci95[1] <= 100
    item = res.items[1]
    assert item["correct"] and item["trajectory"] and item["error"] is None
    assert res.items[0]["error"].startswith("bad_action")
    res.to_dict()  # JSON-safe


def test_rollout_grader_via_registry(tw_games):
    from a2c.runtime.graders import get_grader

    g = get_grader({"kind": "rollout", "env": {"kind": "textworld"}})
    assert isinstance(g, RolloutGrader)
    out = g.grade_predictions({}, [])
    assert not out.valid


# ------------------------------------------------------------------ the workspace's l3/ folder
ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]


def test_record_prompts_are_the_prompts_the_policy_saw(tw_games, oracle):
    root, splits = tw_games
    recs = splits["test"]
    seen = []

    def policy(prompts):
        seen.extend(prompts)
        return oracle(recs)(prompts)

    eps = run_rollouts(recs, env_factory(ENV_CFG, root), get_format("textworld"), policy,
                       RolloutConfig.from_env_cfg(ENV_CFG), record_prompts=True)
    for ep in eps:
        assert len(ep.info["prompts"]) == len(ep.steps)
        assert all(p in seen for p in ep.info["prompts"])
    assert sum(len(ep.info["prompts"]) for ep in eps) == len(seen)


def test_copied_games_run_from_the_copy(tw_games, tmp_path):
    """The run copies each record's referenced files; the engine needs game_file AND game_json."""
    from a2c.runtime.data import copy_referenced_files

    root, splits = tw_games
    rec = splits["train"][0]
    copied = copy_referenced_files([rec], root, tmp_path)
    assert set(copied) == {rec["game_file"], rec["game_json"]}
    env = TextWorldEnv(tmp_path / rec["game_file"])
    obs, info = env.reset()
    for a in rec["walkthrough"]:
        obs, _, done, info = env.step(a)
    assert done and info["won"]
    env.close()


def test_prompt_format_doc_is_rendered_from_the_code():
    """generated/textquest/workspace/l3/PROMPT_FORMAT.md states what prompts.py builds."""
    import json

    from a2c.runtime.envs.prompts import TextWorldFormat, describe

    task = json.loads((ROOT / "generated" / "textquest" / "bundle.json").read_text())["task"]
    env = task["grader"]["env"]
    doc = (ROOT / "generated" / "textquest" / "workspace" / "l3" / "PROMPT_FORMAT.md").read_text()
    d = describe("textworld", env["options"], env["history"])
    assert TextWorldFormat.system in doc and d["action_rule"] in doc
    assert json.dumps(d["example_step2"], sort_keys=True, indent=2) in doc
    cfg = json.loads((ROOT / "generated" / "textquest" / "workspace" / "l3" / "env.json").read_text())
    assert {k: cfg[k] for k in ("kind", "max_steps", "history", "options")} == \
        {k: env[k] for k in ("kind", "max_steps", "history", "options")}
    assert "heldout" not in json.dumps(cfg) and "data_root" not in cfg


def test_rollout_example_expert_writes_trajectories(tw_games, tmp_path):
    """l3/rollout_example.py --expert: the walkthroughs, in the evaluation format, as SFT rows."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from a2c.runtime.envs.prompts import get_format

    root, splits = tw_games
    ws = tmp_path / "ws"
    shutil.copytree(ROOT / "generated" / "textquest" / "workspace" / "l3", ws / "l3")
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in splits["train"]))
    env = {**os.environ, "A2C_DATA_DIR": str(root)}
    proc = subprocess.run([sys.executable, "l3/rollout_example.py", "--expert", "--out", "t.jsonl"],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "(100.0%)" in proc.stderr
    rows = [json.loads(line) for line in (ws / "t.jsonl").read_text().splitlines()]
    assert len(rows) == sum(len(r["walkthrough"]) for r in splits["train"])
    first = rows[0]
    assert first["won"] and first["step"] == 0
    assert first["completion"][0]["content"] == splits["train"][0]["walkthrough"][0]
    assert first["prompt"][0]["content"] == get_format("textworld").system
    assert first["prompt"][-1]["content"].endswith("\n\nAction:")


def test_unprintable_actions_fail_only_their_episode(tw_games):
    """Control characters hang or crash the Z-machine: they never reach it."""
    from a2c.runtime.envs.textworld.env import engine_action

    assert engine_action(" take\x0e  key\ufffd from  box ") == "take key from box"
    assert len(engine_action("x" * 1000)) == 200
    root, splits = tw_games
    recs = splits["test"][:2]
    outs = {recs[0]["prompt"].strip(): "\x0e\x13\ufffd"}

    def policy(prompts):
        res = []
        for msgs in prompts:
            goal = msgs[1]["content"].split("Goal: ", 1)[1].split("\n\nObservation:")[0].strip()
            res.append(outs.get(goal, "look\x02"))
        return res

    eps = run_rollouts(recs, env_factory(ENV_CFG, root), get_format("textworld"), policy,
                       RolloutConfig(max_steps=2))
    assert eps[0].failure.startswith("bad_action") and "printable" in eps[0].failure
    assert eps[1].failure is None and len(eps[1].steps) == 2


@pytest.mark.slow
def test_prefix_cache_changes_nothing_but_the_work_with_smollm2(tw_games):
    """A real model (SmolLM2, Llama layers; the fast tests use the tiny Qwen2) on real games: the
    grader with the prefix cache gives exactly the items it gives without, in float32, lockstep
    and one at a time, while computing far fewer prompt tokens."""
    from a2c.runtime.inference import load_engine
    from a2c.runtime.models import prepare_builtin

    root, splits = tw_games
    recs = (splits["train"] + splits["test"])[:3]     # three games x four passes: ~1 minute
    env = {**ENV_CFG, "max_steps": 4, "data_root": str(root)}
    grader = RolloutGrader({"kind": "rollout", "env": env,
                            "inference": {"max_new_tokens": 12, "stop": ["\n"]}})
    path = prepare_builtin("smollm2-135m-instruct")
    items = {}
    for mb in (0, 256):
        backend = load_engine(path, "transformers", dtype="float32", prefix_cache_mb=mb)
        try:
            for lockstep in (True, False):
                res = grader.grade_backend(backend, recs, lockstep=lockstep)
                items[mb, lockstep] = [(i["id"], i["extracted"], i["output"], i["won"])
                                       for i in res.items]
            if mb:
                stats = backend.prefix_cache.stats
                assert stats.reused_tokens > 0.5 * stats.prompt_tokens, stats
        finally:
            backend.close()
    assert items[256, True] == items[0, True]
    assert items[256, False] == items[0, False] == items[0, True]
    assert any(len(x[1]) > 1 for x in items[0, True])        # multi-step episodes were played
