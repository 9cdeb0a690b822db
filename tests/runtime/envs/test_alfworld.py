"""ALFWorld adapter: observation/task parsing, the ReAct prompt, think steps, failures, and play on
the project's fixture games (tests/fixtures/l3/alfworld, ALFWorld layout) with a fake engine, and
with the real engine (alfworld + textworld[pddl]) where it is installed."""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path

import pytest

from a2c.runtime.envs.alfworld import env as aw
from a2c.runtime.envs.base import BadAction
from a2c.runtime.envs.prompts import Turn, get_format
from a2c.runtime.envs.registry import env_factory
from a2c.runtime.envs.rollout import RolloutConfig, run_rollouts
from a2c.runtime.envs.rollout_grader import RolloutGrader

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "l3" / "alfworld"
DATA = FIXTURES / "json_2.1.1"
HAS_ENGINE = aw.engine_available()
needs_engine = pytest.mark.skipif(not HAS_ENGINE, reason="alfworld / textworld[pddl] not installed")


def _load_fake():
    spec = importlib.util.spec_from_file_location("alfworld_fake_engine", FIXTURES / "fake_engine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FakeAlfredEngine


aw.register_engine("fixture", _load_fake())


class Slow:
    def __init__(self, game_file):
        pass

    def reset(self):
        return "-= Welcome to TextWorld, ALFRED! =-\n\nA room.\n\nYour task is to: wait.", {}

    def step(self, command):
        time.sleep(3)
        return "late", False, {}

    def close(self):
        pass


class Crashing(Slow):
    def step(self, command):
        raise RuntimeError("engine exploded")


aw.register_engine("slow", Slow)
aw.register_engine("crashing", Crashing)


def games(split):
    return sorted(DATA.glob(f"{split}/*/*/game.tw-pddl"))


def records(split):
    out = []
    for gf in games(split):
        rel = gf.relative_to(FIXTURES).as_posix()
        out.append({"id": rel.rsplit("/", 1)[0], "prompt": "", "game_file": rel,
                    "walkthrough": json.loads(gf.read_text())["walkthrough"]})
    return out


class WalkthroughPolicy:
    """Thinks once, then plays the record's walkthrough (found by the task text)."""

    def __init__(self, recs, bad=()):
        self.by_task = {}
        for r in recs:
            traj = json.loads((FIXTURES / r["game_file"]).parent.joinpath("traj_data.json").read_text())
            self.by_task[traj["turk_annotations"]["anns"][0]["task_desc"]] = r
        self.bad = set(bad)
        self.calls = []

    def __call__(self, prompts):
        self.calls.append(len(prompts))
        outs = []
        for msgs in prompts:
            task = re.search(r"Here is the task\.\n.*Your task is to: (.*?)\.", msgs[1]["content"], re.S)
            rec = self.by_task[task.group(1)]
            n = sum(1 for m in msgs if m["role"] == "assistant")
            if rec["id"] in self.bad:
                outs.append("\n  \n")
            elif n == 0:
                outs.append("think: I should follow the plan.\nmore text")
            else:
                walk = rec["walkthrough"]
                outs.append("> " + walk[n - 1] if n - 1 < len(walk) else "look")
        return outs


FAKE_CFG = {"kind": "alfworld", "max_steps": 50, "options": {"engine": "fixture"},
            "history": {"max_tokens": 6000}}


# ---------------------------------------------------------------- engine-independent parts
def test_fixture_layout_is_alfworld_like():
    assert len(games("valid_unseen")) == 2 and len(games("train")) == 1
    for gf in games("train") + games("valid_unseen"):
        game = json.loads(gf.read_text())
        assert game["solvable"] and "(:goal" in game["pddl_problem"]
        assert json.loads((gf.parent / "traj_data.json").read_text())["task_type"]


def test_observation_and_task_parsing():
    raw = ("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
           "around you, you see a fridge 1.\n\nYour task is to: put some apple in fridge.")
    obs = aw.clean_observation(raw)
    assert obs.startswith("You are in the middle") and "Welcome" not in obs
    assert aw.parse_task(obs) == "put some apple in fridge"
    assert aw.clean_observation("You arrive at loc 12. On the desk 1, you see a pen 1.") == \
        "On the desk 1, you see a pen 1."
    assert aw.task_family("pick_heat_then_place_in_recep") == "heat"
    assert aw.task_family("pick_two_obj_and_place") == "puttwo"
    assert aw.task_family("look_at_obj_in_light") == "examine"
    assert aw.task_family("nonsense") is None


def test_task_type_from_traj_data_or_folder(tmp_path):
    gf = games("valid_unseen")[1]
    assert aw.read_task_type(gf) == "pick_heat_then_place_in_recep"
    d = tmp_path / "pick_cool_then_place_in_recep-Apple-None-Fridge-9" / "trial_T1"
    d.mkdir(parents=True)
    (d / "game.tw-pddl").write_text("{}")
    assert aw.read_task_type(d / "game.tw-pddl") == "pick_cool_then_place_in_recep"


def test_react_prompt_uses_examples_of_the_task_type():
    fmt = get_format("alfworld")
    info = {"task_type": "pick_clean_then_place_in_recep", "admissible_commands": ["look"]}
    obs = "You are in the middle of a room.\nYour task is to: put a clean mug in countertop."
    msgs = fmt.messages("put a clean mug in countertop", obs, [], info)
    assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith("Interact with a household")
    user = msgs[1]["content"]
    assert user.startswith("Here are two examples.\n")
    assert user.count("Your task is to:") == 3 and "clean" in user.split("Here is the task.")[0]
    assert "heat some egg" not in user                         # other families are not shown
    assert user.endswith("Here is the task.\n" + obs)
    assert "Admissible" not in user                             # ReAct lists no actions
    turns = [Turn("think: find a mug", "OK."), Turn("go to cabinet 1", "The cabinet 1 is closed.")]
    msgs = fmt.messages("t", obs, turns, info)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[3]["content"] == "OK." and msgs[-1]["content"] == "The cabinet 1 is closed."
    # unknown task type: no examples; list_actions option appends admissible commands
    fmt2 = get_format("alfworld", {"list_actions": True})
    user2 = fmt2.messages("t", obs, [], {"admissible_commands": ["look", "go to desk 1"]})[1]["content"]
    assert user2.startswith("Here is the task.") and user2.endswith("Admissible actions: look, go to desk 1")


def test_prompts_file_in_react_format(tmp_path):
    f = tmp_path / "prompts.json"
    f.write_text(json.dumps({"react_put_0": "EX-ZERO\n", "react_put_1": "EX-ONE\n"}))
    fmt = get_format("alfworld", {"prompts_file": str(f)})
    user = fmt.messages("t", "obs", [], {"task_type": "pick_and_place_simple"})[1]["content"]
    assert user == "Here are two examples.\nEX-ONE\nEX-ZERO\n\nHere is the task.\nobs"


def test_action_parsing():
    fmt = get_format("alfworld")
    assert fmt.parse_action("> go to cabinet 1\n> open cabinet 1") == "go to cabinet 1"
    assert fmt.parse_action("\n  Action: take apple 1 from countertop 1.") == "take apple 1 from countertop 1"
    assert fmt.parse_action("think: First I need an apple.") == "think: First I need an apple."
    for bad in ("", "   \n \n", "> "):
        with pytest.raises(BadAction):
            fmt.parse_action(bad)


# ---------------------------------------------------------------- the Env on the fake engine
def test_env_plays_fixture_game_with_think_and_legacy_put():
    gf = games("train")[0]
    env = aw.AlfWorldEnv(gf, {"engine": "fixture"})
    obs, info = env.reset()
    assert info["task"] == "put some apple in fridge" and info["task_type"] == "pick_and_place_simple"
    assert "go to countertop 1" in info["admissible_commands"] and not info["won"]
    assert obs.startswith("You are in the middle of a room")
    assert env.step("think: where is the apple?")[:3] == ("OK.", 0.0, False)
    assert env.step("dance wildly")[0] == "Nothing happens."
    with pytest.raises(BadAction):
        env.step("  ")
    for a in ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1"]:
        obs, reward, done, info = env.step(a)
        assert not done
    obs, reward, done, info = env.step("put apple 1 in/on fridge 1")   # ReAct's old command
    assert (obs, reward, done, info["won"]) == ("You move the apple 1 to the fridge 1.", 1.0, True, True)
    env.close()


def test_rollouts_win_with_walkthroughs_in_lockstep():
    recs = records("valid_unseen")
    policy = WalkthroughPolicy(recs)
    grader = RolloutGrader({"kind": "rollout", "env": {**FAKE_CFG, "data_root": str(FIXTURES)}})
    res = grader.grade_policy(policy, recs)
    assert res.score == 100.0 and res.metrics["success_rate"] == 100.0
    assert policy.calls[0] == 2                                   # one batch for both episodes
    item = res.items[0]
    assert item["trajectory"][0]["action"].startswith("think:") and item["trajectory"][1]["observation"] == "OK."
    assert item["won"] and item["error"] is None and item["prompt"] == "put a clean mug in countertop"


def test_max_steps_bad_action_crash_and_missing_game_fail_only_their_episode(tmp_path):
    recs = records("valid_unseen")
    policy = WalkthroughPolicy(recs, bad={recs[0]["id"]})
    missing = {"id": "missing", "prompt": "", "game_file": "json_2.1.1/valid_unseen/nope/game.tw-pddl"}
    factory = env_factory(FAKE_CFG, FIXTURES)
    eps = run_rollouts(recs + [missing], factory, get_format("alfworld"), policy,
                       RolloutConfig.from_env_cfg(FAKE_CFG))
    assert eps[0].failure.startswith("bad_action:") and not eps[0].won
    assert eps[1].won and eps[1].failure is None
    assert eps[2].failure.startswith("env_crash: FileNotFoundError")
    # max_steps: 3 steps are not enough to win; the episode stops unfinished, not failed
    cfg3 = {**FAKE_CFG, "max_steps": 3}
    eps = run_rollouts(recs[1:], env_factory(cfg3, FIXTURES), get_format("alfworld"),
                       WalkthroughPolicy(recs), RolloutConfig.from_env_cfg(cfg3))
    assert len(eps[0].steps) == 3 and not eps[0].won and eps[0].failure is None
    assert eps[0].info.get("stopped") == "max_steps"


def test_engine_crash_and_timeout_end_the_episode_as_failed():
    recs = records("valid_unseen")[:1]
    policy = lambda prompts: ["go to fridge 1"] * len(prompts)  # noqa: E731
    for engine, reason in (("crashing", "env_crash: RuntimeError: engine exploded"), ("slow", "timeout:")):
        cfg = {**FAKE_CFG, "options": {"engine": engine, "step_timeout_s": 0.5}}
        grader = RolloutGrader({"kind": "rollout", "env": {**cfg, "data_root": str(FIXTURES)}})
        res = grader.grade_policy(policy, recs)
        assert res.score == 0.0 and res.items[0]["error"].startswith(reason), res.items[0]["error"]
        assert res.metrics["failed_episodes"] == 1


def test_unknown_engine_fails_the_episode():
    factory = env_factory({**FAKE_CFG, "options": {"engine": "nope"}}, FIXTURES)
    eps = run_rollouts(records("train"), factory, get_format("alfworld"), lambda p: ["look"] * len(p),
                       RolloutConfig(max_steps=2))
    assert eps[0].failure.startswith("env_crash: EnvCrash: unknown ALFWorld engine 'nope'")


# ---------------------------------------------------------------- the real engine
def _real_game_files(tmp_path) -> list[dict]:
    """The fixtures as the real data ships them: domain and grammar (with the task) inline."""
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    out = []
    for rec in records("valid_unseen") + records("train"):
        src = (FIXTURES / rec["game_file"]).parent
        dst = tmp_path / rec["id"]
        dst.mkdir(parents=True)
        traj = json.loads((src / "traj_data.json").read_text())
        game = json.loads((src / "game.tw-pddl").read_text())
        game["pddl_domain"] = Path(ALFRED_PDDL_PATH).read_text()
        game["grammar"] = Path(ALFRED_TWL2_PATH).read_text().replace(
            "UNKNOWN GOAL", traj["turk_annotations"]["anns"][0]["task_desc"])
        (dst / "game.tw-pddl").write_text(json.dumps(game))
        (dst / "traj_data.json").write_text(json.dumps(traj))
        out.append({**rec, "game_file": f"{rec['id']}/game.tw-pddl"})
    return out


@needs_engine
def test_real_engine_matches_fake_engine_on_fixtures(tmp_path):
    recs = _real_game_files(tmp_path)
    for rec in recs:
        real = aw.AlfWorldEnv(tmp_path / rec["game_file"], {})
        fake = aw.AlfWorldEnv(FIXTURES / rec["id"] / "game.tw-pddl", {"engine": "fixture"})
        r_obs, r_info = real.reset()
        f_obs, f_info = fake.reset()
        assert r_obs == f_obs and r_info["task"] == f_info["task"]
        assert set(f_info["admissible_commands"]) <= set(r_info["admissible_commands"])
        for a in rec["walkthrough"]:
            r, f = real.step(a), fake.step(a)
            assert r[:3] == f[:3], (a, r[:3], f[:3])
        assert r[3]["won"] and r[2]
        real.close()


@needs_engine
def test_real_engine_rollout_grader(tmp_path):
    recs = _real_game_files(tmp_path)
    policy = WalkthroughPolicy([{**r, "game_file": r["id"] + "/game.tw-pddl"} for r in records("valid_unseen")])
    env = {"kind": "alfworld", "max_steps": 50, "data_root": str(tmp_path)}
    res = RolloutGrader({"kind": "rollout", "env": env}).grade_policy(policy, recs[:2])
    assert res.score == 100.0, [i["error"] for i in res.items]


# ---------------------------------------------------------------- the data generator
def test_generator_lists_fetched_games_into_records(tmp_path):
    from a2c.runtime.data.generators import get_generator

    gen = get_generator("alfworld")
    splits = gen({"root": str(FIXTURES)}, 0, tmp_path)
    assert [len(splits["train"]), len(splits["test"])] == [1, 2]
    rec = splits["test"][1]
    assert rec["id"] == "valid_unseen/pick_heat_then_place_in_recep-Egg-None-DiningTable-3/trial_T20190003_000003_000003"
    assert rec["task_type"] == "pick_heat_then_place_in_recep" and rec["prompt"].startswith("heat some egg")
    env = aw.AlfWorldEnv(tmp_path / rec["game_file"], {"engine": "fixture"})
    assert env.reset()[1]["task"] == "heat some egg and put it in diningtable"
    assert (tmp_path / rec["traj_file"]).is_file()
    limited = gen({"root": str(FIXTURES), "limit": {"test": 1}}, 0, tmp_path / "b")
    assert len(limited["test"]) == 1
    from a2c.runtime.data import DataError
    with pytest.raises(DataError, match="a2c data fetch alfworld"):
        gen({"root": str(tmp_path / "empty")}, 0, tmp_path / "c")
