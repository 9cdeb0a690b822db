"""The level-3 RL reference agent: group advantages over episode returns, the informative-group
filter, the packing of a multi-turn episode for TRL (loss on the model's tokens only), and one real
TRL GRPO update from recorded episodes on the tiny model (fast).
"""

from __future__ import annotations

import pytest

from a2c.agents.kit import episodes
from a2c.runtime.envs.base import Episode, Transition

SYSTEM = {"role": "system", "content": "You are playing a text adventure game."}


def _prompts(goal: str = "open the chest") -> list[list[dict]]:
    first = [SYSTEM, {"role": "user", "content": f"Goal: {goal}\n\nObservation: a room\n\n"
                                                 "Valid actions: open chest, look\n\nAction:"}]
    second = [SYSTEM, {"role": "user", "content": f"Goal: {goal}\n\nObservation: a room"},
              {"role": "assistant", "content": "open chest"},
              {"role": "user", "content": "Observation: it opens\n\nValid actions: take key, "
                                          "look\n\nAction:"}]
    return [first, second]


def _played(game: str, ret: float, outputs=("open chest", "take key")) -> episodes.Played:
    return episodes.Played(game, _prompts(game), list(outputs), ret, won=ret == 1.0)


def test_advantages_are_group_relative_and_zero_for_a_uniform_group():
    adv = episodes.advantages([1.0, 0.0, 0.0, 0.0])
    assert adv[0] > 0 > adv[1] and adv[1] == adv[2] == adv[3]
    assert abs(sum(adv)) < 1e-9
    assert episodes.advantages([0.0, 0.0, 0.0]) == [0.0, 0.0, 0.0]
    assert episodes.advantages([1.0, 1.0]) == [0.0, 0.0]


def test_only_games_with_different_returns_are_informative():
    played = [_played("a", 1.0), _played("a", 0.0), _played("b", 0.0), _played("b", 0.0),
              _played("c", 1.0), _played("c", 1.0)]
    groups = episodes.group_by_game(played)
    assert set(groups) == {"a", "b", "c"} and len(groups["a"]) == 2
    assert set(episodes.informative(groups)) == {"a"}


def test_episode_return_follows_the_graders_rule():
    won = Episode(id="g", won=True, reward=0.3, steps=[Transition("o", "a", 1.0, "a")])
    failed = Episode(id="g", won=True, reward=1.0, failure="bad_action: nothing")
    assert episodes.episode_return(won, "success") == 1.0
    assert episodes.episode_return(won, "reward") == 0.3
    assert episodes.episode_return(failed, "success") == 0.0


def test_from_episode_keeps_the_exact_prompts_and_raw_outputs():
    ep = Episode(id="g", won=True, steps=[Transition("o1", "open chest", 0.0, " open chest"),
                                          Transition("o2", "take key", 1.0, "take key.")],
                 info={"prompts": _prompts()})
    p = episodes.from_episode("g", ep)
    assert p.outputs == [" open chest", "take key."] and p.prompts == _prompts() and p.ret == 1.0


def test_rft_rows_are_the_winners_steps_with_parsed_actions():
    from a2c.runtime.envs.prompts import get_format
    fmt = get_format("textworld")
    rows = episodes.sft_rows(episodes.winners([_played("a", 1.0, ("Action: open chest", "x")),
                                               _played("a", 0.0)]), fmt.parse_action)
    assert [r["completion"][0]["content"] for r in rows] == ["open chest", "x"]
    assert rows[0]["prompt"] == _prompts("a")[0]


@pytest.fixture(scope="module")
def smol_tokenizer():
    """SmolLM2's tokenizer (ChatML) where the built-in model is prepared; else the tiny one's."""
    from transformers import AutoTokenizer

    from a2c.runtime.models import builtin_dir, is_prepared
    name = "smollm2-135m-instruct" if is_prepared("smollm2-135m-instruct") else None
    if name is None:
        pytest.skip("SmolLM2 not prepared in the cache")
    return AutoTokenizer.from_pretrained(builtin_dir(name))


def _check_pack(tokenizer):
    packed = episodes.pack(tokenizer, _played("a", 1.0, (" open chest", "take key")))
    ids, mask = packed.completion_ids, packed.env_mask
    assert len(ids) == len(mask) and set(mask) == {0, 1}
    model = tokenizer.decode([i for i, m in zip(ids, mask) if m])
    env = tokenizer.decode([i for i, m in zip(ids, mask) if not m])
    eos = tokenizer.eos_token
    # the model's tokens: its two outputs, each with the end of its turn; nothing else
    assert model == f" open chest{eos}take key{eos}"
    # the environment's tokens: the next step's newest message (its own action list)
    assert "Observation: it opens" in env and "take key, look" in env
    assert "open chest" not in env
    # the prompt is exactly the evaluation's first prompt with the generation prompt
    first = tokenizer.apply_chat_template(_prompts("a")[0], tokenize=False,
                                          add_generation_prompt=True)
    assert tokenizer.decode(packed.prompt_ids) == first


def test_pack_masks_the_environment_smollm2(smol_tokenizer):
    _check_pack(smol_tokenizer)


def test_pack_masks_the_environment_tiny(tiny_path):
    from transformers import AutoTokenizer
    _check_pack(AutoTokenizer.from_pretrained(tiny_path))


def test_grpo_step_moves_the_policy_toward_the_winning_episode(tiny_path, tmp_path):
    """A real TRL GRPOTrainer step from recorded episodes: the won episode's actions become more
    likely, the lost one's less, and nothing but the model's tokens carry loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from a2c.agents.reference.l3_rl import grpo_step
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tiny_path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    win = _played("a", 1.0, ("open chest", "take key"))
    lose = _played("a", 0.0, ("look", "look"))

    def logp(p: episodes.Played) -> float:
        packed = episodes.pack(tok, p)
        ids = torch.tensor([packed.prompt_ids + packed.completion_ids])
        mask = torch.tensor([[0] * len(packed.prompt_ids) + packed.env_mask])
        with torch.no_grad():
            logits = model(ids).logits[:, :-1]
        lp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
        return float((lp * mask[:, 1:]).sum())

    before = (logp(win), logp(lose))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    stats = grpo_step(model, tok, {"a": [win, lose]}, optimizer, lr=3e-3, seed=0,
                      work_dir=tmp_path / "grpo", micro=2)
    after = (logp(win), logp(lose))
    assert stats["sequences"] == 2 and stats["seconds"] > 0
    assert after[0] > before[0] and after[1] < before[1], (before, after)


def test_frozen_lower_layers_do_not_move_and_minibatches_are_optimizer_steps(tiny_path, tmp_path):
    """freeze_lower: the embeddings and the lowest share of the layers keep their weights
    through an update; `minibatches` splits the batch into that many optimizer steps."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from a2c.agents.reference.l3_rl import freeze_lower, grpo_step
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tiny_path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    layers = model.model.layers
    assert freeze_lower(model, 0.0) == 0
    frozen = freeze_lower(model, 0.5)
    assert frozen == max(0, min(len(layers) - 1, round(0.5 * len(layers)))) and frozen >= 1
    snapshot = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    groups = {"a": [_played("a", 1.0, ("open chest", "take key")),
                    _played("a", 0.0, ("look", "look"))],
              "b": [_played("b", 0.0, ("look", "look")),
                    _played("b", 1.0, ("open chest", "take key"))]}
    stats = grpo_step(model, tok, groups, optimizer, lr=3e-3, seed=0, work_dir=tmp_path / "g",
                      micro=2, minibatches=2)
    assert stats["optimizer_steps"] == 2 and stats["sequences"] == 4
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, snapshot[n])}
    assert not any(n.startswith(f"model.layers.{i}.") for n in moved for i in range(frozen))
    assert "model.embed_tokens.weight" not in moved
    assert any(n.startswith(f"model.layers.{len(layers) - 1}.") for n in moved), moved


def test_valid_action_shaping_keeps_a_win_far_above_a_valid_loss():
    ep = Episode(id="g", steps=[Transition("o", "open chest", 0.0, "open chest"),
                                Transition("o", "dance", 0.0, "dance")])
    valid = episodes.valid_steps(ep, [["look", "Open chest"], ["look"]])
    assert valid == [True, False]
    assert episodes.valid_steps(ep, None) == [False, False]
    assert episodes.shaped_return(0.0, valid, 0.1) == pytest.approx(0.05)
    assert episodes.shaped_return(1.0, [True, True], 0.1) == pytest.approx(1.1)
    assert episodes.shaped_return(0.0, valid, 0.0) == 0.0
    # the unshaped return is kept: success rates and the winners use it
    ep.info["prompts"] = _prompts()
    played = episodes.from_episode("g", ep, admissible=[["open chest"], ["look"]], bonus=0.1)
    assert played.score == 0.0 and played.ret == pytest.approx(0.05)
    assert episodes.winners([played]) == []


def test_arena_notes_the_listed_actions_per_step():
    from a2c.agents.reference.l3_arena import _Listing

    class Fake:
        def reset(self):
            return "room", {"admissible_commands": ["open chest", "look"]}

        def step(self, action):
            return "ok", 0.0, False, {"admissible_commands": ["take key"]}

        def close(self):
            pass

    seen: list = []
    env = _Listing(Fake(), seen)
    env.reset()
    env.step("open chest")
    assert seen == [["open chest", "look"], ["take key"]]


def test_exploration_takes_listed_actions_only():
    import random as _random

    from a2c.agents.reference.l3_arena import Policy, listed_actions
    assert listed_actions(_prompts()[0]) == ["open chest", "look"]
    assert listed_actions([{"role": "user", "content": "no list"}]) == []

    class Backend:
        def generate(self, prompts, settings):
            return ["I narrate" for _ in prompts]

    from a2c.runtime.inference import GenerationSettings
    policy = Policy.__new__(Policy)
    policy.backend, policy.calls = Backend(), 0
    prompts = [_prompts()[0]] * 200 + [[{"role": "user", "content": "no list"}]]
    out = policy(GenerationSettings(), explore=0.5, rng=_random.Random(0))(prompts)
    explored = [o for o in out[:200] if o != "I narrate"]
    assert set(explored) <= {"open chest", "look"} and 60 < len(explored) < 140
    assert out[-1] == "I narrate" and policy.explored == len(explored)
    assert policy(GenerationSettings())(prompts[:3]) == ["I narrate"] * 3


def test_strongest_groups_keep_the_widest_return_spread():
    groups = {"a": [_played("a", 1.0), _played("a", 0.0)],
              "b": [_played("b", 0.05), _played("b", 0.0)],
              "c": [_played("c", 1.1), _played("c", 0.0)]}
    assert list(episodes.strongest(groups, 2)) == ["c", "a"]
    assert episodes.strongest(groups, 0) == groups and episodes.strongest(groups, 5) == groups


def test_rollouts_sample_in_float32_where_bf16_would_be_emulated():
    from a2c.agents.reference.l3_arena import rollout_options
    task = {"dtype": "bfloat16", "max_new_tokens": 16}
    assert rollout_options(task, "off") == {"dtype": "float32", "max_new_tokens": 16}
    assert rollout_options(task, "on") == task                  # bf16 hardware: as graded
    assert rollout_options({"dtype": "float32"}, "off") == {"dtype": "float32"}
    assert rollout_options({}, "off") == {}                     # the task's default, untouched
