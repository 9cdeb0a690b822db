"""WebShop adapter against the project's WebShop-compatible fixture server on loopback."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import pytest
from l3_webshop_helpers import FIXTURE_COMMAND
from l3_webshop_helpers import webshop_fixture as fx

from a2c.contracts.spec import ServiceSpec
from a2c.runtime.env_services import env_services_running
from a2c.runtime.envs.base import BadAction
from a2c.runtime.envs.prompts import get_format
from a2c.runtime.envs.registry import env_factory
from a2c.runtime.envs.rollout_grader import RolloutGrader
from a2c.runtime.envs.webshop.data import sessions
from a2c.runtime.envs.webshop.env import WebShopEnv

ROOT = Path(__file__).resolve().parents[3]
RECORDS = [{"id": f"fixed_{i}", "session": f"fixed_{i}", "prompt": "", "answer": ""}
           for i in range(len(fx.GOALS))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan(goal: dict) -> list[str]:
    """The right actions for a goal: search, open the target, choose its options, buy."""
    product = fx.BY_ASIN[goal["asin"]]
    acts = [f"search[{product['name']} {' '.join(goal['attributes'])}]", f"click[{goal['asin']}]"]
    for opt in goal["goal_options"]:
        acts.append(f"click[{opt}]")
    return acts + ["click[Buy Now]"]


class ScriptedShopper:
    """Finds the instruction in the prompt and plays its plan by turn number."""

    def __init__(self, bad: dict[str, str] | None = None, hook=None):
        self.plans = {g["instruction_text"]: plan(g) for g in fx.GOALS}
        self.bad = bad or {}           # instruction index -> output at turn 1
        self.hook = hook
        self.calls = 0

    def __call__(self, prompts):
        self.calls += 1
        if self.hook:
            self.hook(self.calls)
        outs = []
        for msgs in prompts:
            goal = re.search(r"Goal: (.*?)\n\nObservation:", msgs[1]["content"], re.S).group(1)
            n = sum(1 for m in msgs if m["role"] == "assistant")
            idx = next(i for i, g in enumerate(fx.GOALS) if g["instruction_text"] == goal.strip())
            if n == 1 and str(idx) in self.bad:
                outs.append(self.bad[str(idx)])
                continue
            steps = self.plans[goal.strip()]
            outs.append(f"Action: {steps[n]}" if n < len(steps) else "click[Back to Search]")
        return outs


def grader(base_url: str, **options) -> RolloutGrader:
    return RolloutGrader({"kind": "rollout", "inference": {},
                          "env": {"kind": "webshop", "max_steps": 50,
                                  "options": {"base_url": base_url, **options}}})


# ------------------------------------------------------------------------------------ reward
def test_fixture_reward_is_webshops_rule():
    g = fx.GOALS[0]
    p = fx.BY_ASIN[g["asin"]]
    full, info = fx.get_reward(p, g, p["price"], {"size": "3 ounce (pack of 1)", "scent": "bright citrus"})
    assert full == 1.0 and info["r_type"]["r_type"] == 1.0
    # no options chosen: attribute + price of 1 + 2 options + 1
    assert fx.get_reward(p, g, p["price"], {})[0] == pytest.approx(2 / 4)
    # over the price limit
    assert fx.get_reward(p, g, 99.0, {"size": "3 ounce (pack of 1)", "scent": "bright citrus"})[0] \
        == pytest.approx(3 / 4)
    # a product of another type scores 0 (r_type 0)
    assert fx.get_reward(fx.BY_ASIN["b0fix00006"], g, 9.49, {})[0] == 0.0
    assert fx.token_set_ratio("navy blue", "blue navy") == 100
    assert fx.normalize_color("heather grey") == "grey"


# ------------------------------------------------------------------------------------ adapter
def test_episode_walkthrough_and_protocol(webshop_url):
    env = WebShopEnv({"id": "fixed_2"}, {"base_url": webshop_url})
    obs, info = env.reset()
    assert info["task"] == fx.GOALS[2]["instruction_text"]
    assert "[SEP]" in obs and info["admissible_commands"] == ["search[<query>]"]
    obs, r, done, info = env.step("search[yoga pants high waist]")
    assert "click[b0fix00005]" in info["admissible_commands"] and "Page 1" in obs
    assert fx.GOALS[2]["instruction_text"] not in obs          # the instruction is shown once
    obs, r, done, info = env.step("click[b0fix00005]")
    assert "click[navy blue]" in info["admissible_commands"] and "click[Buy Now]" in info["admissible_commands"]
    env.step("click[Features]")
    obs, r, done, info = env.step("click[< Prev]")
    assert info["page_type"] == "item"
    env.step("click[NAVY BLUE]")                              # case-insensitive
    obs, r, done, info = env.step("click[medium]")
    assert info["options"] == {"color": "navy blue", "size": "medium"}
    obs, r, done, info = env.step("click[Buy Now]")
    assert done and r == 1.0 and info["won"] and info["final_reward"] == 1.0
    with pytest.raises(BadAction):
        env.step("click[Buy Now]")


def test_bad_actions_raise(webshop_url):
    env = WebShopEnv({"id": "fixed_0"}, {"base_url": webshop_url})
    env.reset()
    for action in ("buy it", "click[Buy Now]", "search[]"):
        with pytest.raises(BadAction):
            env.step(action)
    env.step("search[deodorant]")
    with pytest.raises(BadAction, match="only possible on the start page"):
        env.step("search[deodorant]")
    noop = WebShopEnv({"id": "fixed_0"}, {"base_url": webshop_url, "invalid_action": "noop"})
    noop.reset()
    obs, r, done, _ = noop.step("click[nothing]")
    assert obs.startswith("Invalid action") and not done and r == 0.0


def test_prompt_format_parses_actions():
    fmt = get_format("webshop")
    assert fmt.parse_action("I will buy.\nAction: click[Buy Now]") == "click[Buy Now]"
    assert fmt.parse_action("Search[red shoes] ") == "search[red shoes]"
    with pytest.raises(BadAction):
        fmt.parse_action("I would click buy now")


def test_scripted_policy_scores_100(webshop_url):
    result = grader(webshop_url).grade_policy(ScriptedShopper(), RECORDS)
    assert result.valid and result.score == 100.0 and result.n_items == 10
    assert result.metrics["success_rate"] == 100.0 and result.metrics["failed_episodes"] == 0
    item = result.items[0]
    assert item["trajectory"][-1]["action"] == "click[Buy Now]" and item["reward"] == 1.0


def test_wrong_option_and_bad_actions_fail_only_their_episode(webshop_url):
    # instruction 1 picks the wrong colour (partial reward); 3 writes prose; 4 clicks a ghost
    shopper = ScriptedShopper(bad={"3": "I think I should buy tea", "4": "click[b0nothing0]"})
    shopper.plans[fx.GOALS[1]["instruction_text"]] = [
        "search[bluetooth speaker waterproof]", "click[b0fix00003]", "click[red]", "click[Buy Now]"]
    result = grader(webshop_url).grade_policy(shopper, RECORDS[:6])
    by = {it["id"]: it for it in result.items}
    assert by["fixed_1"]["reward"] == pytest.approx(2 / 3) and not by["fixed_1"]["won"]
    assert by["fixed_3"]["error"].startswith("bad_action") and "no search[...]" in by["fixed_3"]["error"]
    assert by["fixed_4"]["error"].startswith("bad_action") and "not clickable" in by["fixed_4"]["error"]
    for i in (0, 2, 5):
        assert by[f"fixed_{i}"]["reward"] == 1.0
    assert result.metrics["failures"]["bad_action"] == 2
    assert result.score == pytest.approx(100 * (3 + 2 / 3) / 6)


def test_server_killed_mid_episode_is_env_crash_others_finish(webshop_url, tmp_path):
    port = free_port()
    spec = {"name": "shard2", "command": f"{FIXTURE_COMMAND} --port {{port}}", "port": port, "health": "/health",
            "startup_timeout_s": 30}
    with env_services_running([ServiceSpec.from_dict(spec)], log_dir=tmp_path) as group:
        records = [dict(r) for r in RECORDS[:4]]
        records[3]["base_url"] = f"http://127.0.0.1:{port}"       # one episode on shard 2

        def kill_shard2(call):
            if call == 3:                   # after two actions of every episode
                group.services[0].stop(grace=2)

        result = grader(webshop_url).grade_policy(ScriptedShopper(hook=kill_shard2), records)
    by = {it["id"]: it for it in result.items}
    assert by["fixed_3"]["error"].startswith("env_crash") and "unreachable" in by["fixed_3"]["error"]
    assert by["fixed_3"]["n_steps"] == 3
    assert all(by[f"fixed_{i}"]["reward"] == 1.0 for i in range(3))
    assert result.valid and result.metrics["failures"]["env_crash"] == 1


def test_hanging_server_times_out_the_episode(webshop_url):
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)                        # accepts connections, never answers
    try:
        records = [dict(RECORDS[0]), {**RECORDS[1], "base_url": f"http://127.0.0.1:{hang.getsockname()[1]}"}]
        started = time.monotonic()
        result = grader(webshop_url, step_timeout_s=1.0, request_timeout_s=3).grade_policy(
            ScriptedShopper(), records)
        assert time.monotonic() - started < 20
    finally:
        hang.close()
    assert result.items[0]["reward"] == 1.0
    assert result.items[1]["error"].startswith("timeout")
    assert result.metrics["failures"]["timeout"] == 1


def test_sessions_generator_and_registry():
    from a2c.runtime.data.generators import get_generator

    assert get_generator("webshop") is sessions
    splits = sessions({}, 0, Path("."))
    assert [r["id"] for r in splits["test"]][:2] == ["fixed_0", "fixed_1"]
    assert len(splits["test"]) == 100 and splits["train"][0]["id"] == "fixed_1500"
    factory = env_factory({"kind": "webshop", "options": {"base_url": "http://x"}}, ".")
    assert isinstance(factory(RECORDS[0]), WebShopEnv)


def test_spec_service_and_grader_end_to_end(tmp_path):
    """specs/tasks/webshop.yaml compiled; its service swapped for the fixture; graded to 100."""
    from a2c.compiler.build import plan as compile_plan

    art = compile_plan([ROOT / "specs" / "tasks" / "webshop.yaml"])[0]
    task = json.loads(art.files["bundle.json"])["task"]
    (svc,) = task["environment"]["services"]
    assert svc["port"] == 3000 and svc["health"] == "/" and svc["startup_timeout_s"] == 900
    assert task["grader"]["env"]["max_steps"] == 50 and task["grader"]["env"]["n_episodes"] == 100
    port = free_port()
    svc = {**svc, "port": port, "startup_timeout_s": 30,
           "command": f"{FIXTURE_COMMAND} --port {{port}}"}
    cfg = json.loads(json.dumps(task["grader"]))
    cfg["env"]["options"]["base_url"] = f"http://127.0.0.1:{port}"
    with env_services_running([ServiceSpec.from_dict(svc)], log_dir=tmp_path):
        result = RolloutGrader(cfg).grade_policy(ScriptedShopper(), RECORDS)
    assert result.score == 100.0 and result.n_items == 10
