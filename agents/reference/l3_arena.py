"""The level-3 RL agent's side of the rollouts (l3_rl.py, l3_rft.py): the arena (the workspace's
l3/env.json, the games, the evaluation's prompt format), the rollout engine as a policy with
epsilon-greedy exploration over the listed valid actions, and the games played in groups.

Why apart from l3_rl.py: playing is the same whatever the update (GRPO in l3_rl, reward-filtered
SFT in l3_rft), and holds no training objective; the update and the loop stay where the report
reads them.
"""

from __future__ import annotations

import random
from pathlib import Path

from a2c.agents.kit import episodes, training
from a2c.agents.kit.environments import RolloutConfig, factory_for, get_format, run_rollouts
from a2c.contracts.env_info import StepInfo
from a2c.contracts.l3_env_file import L3EnvFile


class Arena:
    """The training environment as the agent sees it: env.json, the games, the prompt format."""

    def __init__(self, workspace: Path, data_dir: Path):
        file = L3EnvFile.read(workspace / "l3" / "env.json")
        self.env = file.env
        self.fmt = get_format(self.env.kind, self.env.options)
        self.rollout_cfg = RolloutConfig.from_env(self.env)
        self.factory = factory_for(self.env, data_dir)
        self.score_by = file.score_by
        self.inference = dict(file.inference)

    def settings(self, temperature: float | None = None, seed: int = 0):
        from a2c.agents.kit.inference import GenerationSettings
        inference = dict(self.inference, seed=seed, batch_size=64)
        if temperature is not None:
            inference["temperature"] = temperature
        return GenerationSettings.from_config(inference)

    def play(self, records: list[dict], policy, count_tokens) -> tuple[list, list]:
        """(episodes, per episode the valid-action lists the environment showed at each step)."""
        seen: list[list[list[str]]] = [[] for _ in records]
        slot = {id(rec): i for i, rec in enumerate(records)}

        def factory(rec):
            return _Listing(self.factory(rec), seen[slot[id(rec)]])

        eps = run_rollouts(records, factory, self.fmt, policy, self.rollout_cfg, lockstep=True,
                           record_prompts=True, count_tokens=count_tokens)
        return eps, seen


class _Listing:
    """An environment that notes the valid actions it lists (`admissible_commands`) per step."""

    def __init__(self, env, seen: list):
        self.env, self.seen = env, seen

    def reset(self):
        obs, info = self.env.reset()
        self.seen.append(list(StepInfo.from_dict(info).admissible_commands))
        return obs, info

    def step(self, action):
        obs, reward, done, info = self.env.step(action)
        self.seen.append(list(StepInfo.from_dict(info).admissible_commands))
        return obs, reward, done, info

    def close(self):
        self.env.close()


class Policy:
    """The rollout engine: the grader's own inference engine (bf16 where the task grades in
    bf16 and the CPU has bf16 instructions: `rollout_options`; prefix cache for greedy play),
    its weights copied from the model being trained."""

    def __init__(self, model_dir: Path, options: dict):
        from a2c.agents.kit.inference import load_engine, policy_engine_kwargs, token_counter
        self.backend = load_engine(model_dir, "transformers", **policy_engine_kwargs(options))
        self.count_tokens = token_counter(self.backend)
        self.calls = 0

    def sync(self, model) -> None:
        """The trained weights, cast to the engine's dtype; the prefix cache (keys and values
        of the old weights) is emptied."""
        self.backend.model.load_state_dict(model.state_dict())
        self.backend.reset_prefix_cache()

    def __call__(self, settings, explore: float = 0.0, rng: random.Random | None = None):
        """The policy function for `run_rollouts`: the model's outputs (sampled per `settings`);
        with probability `explore` a step instead takes a random one of the actions the prompt
        lists as valid (epsilon-greedy exploration: the base model narrates instead of acting
        and, sampled, almost never wins an episode, so GRPO would see no return to learn from)."""
        from dataclasses import replace
        rng = rng or random.Random(settings.seed)
        self.explored = 0

        def policy(prompts):
            self.calls += 1
            outputs = self.backend.generate(prompts, replace(settings,
                                                             seed=settings.seed + self.calls))
            if explore > 0:
                for i, prompt in enumerate(prompts):
                    listed = listed_actions(prompt)
                    if listed and rng.random() < explore:
                        outputs[i] = rng.choice(listed)
                        self.explored += 1
            return outputs
        return policy


def rollout_options(options: dict, bf16: str = "auto") -> dict:
    """The rollout engine's options: the task's (bf16 where it grades in bf16), except that a CPU
    without bf16 instructions samples in float32 (`bf16` param: auto/on/off, as for training):
    there a bf16 matmul is emulated and measured ~5x slower than float32 (SmolLM2 on an AVX-512
    CPU without avx512_bf16: a forward of 16 x 300 tokens 36 s against 6 s)."""
    if options.get("dtype") == "bfloat16" and not training.bf16_ok(bf16):
        return {**options, "dtype": "float32"}
    return options


def listed_actions(prompt: list[dict]) -> list[str]:
    """The actions the newest message lists (`Valid actions: a, b, c`, as l3/PROMPT_FORMAT.md
    states the format), or none."""
    if not prompt:
        return []
    for line in str(prompt[-1].get("content", "")).splitlines():
        if line.startswith("Valid actions:"):
            return [a.strip() for a in line[len("Valid actions:"):].split(", ") if a.strip()]
    return []


def play_groups(arena: Arena, policy: Policy, games: list[dict], group: int, temperature: float,
                seed: int, bonus: float = 0.0, explore: float = 0.0) -> list[episodes.Played]:
    """Each game played `group` times with the current policy, sampled (and `explore`: the
    share of steps taking a random listed action); one Played per episode (its return shaped by
    `bonus` for valid actions, see episodes.shaped_return)."""
    records = [dict(g) for g in games for _ in range(group)]
    eps, seen = arena.play(records, policy(arena.settings(temperature, seed), explore=explore,
                                           rng=random.Random(seed)), policy.count_tokens)
    return [episodes.from_episode(str(rec.get("id")), ep, arena.score_by, admissible=listed,
                                  bonus=bonus)
            for rec, ep, listed in zip(records, eps, seen)]


def own_valid_share(played: list[episodes.Played], explored: int) -> float:
    """The share of the model's own actions that were valid: explored steps (a random listed
    action, always valid) are taken out of both counts."""
    steps = sum(len(p.valid) for p in played) - explored
    return max(0, sum(sum(p.valid) for p in played) - explored) / steps if steps > 0 else 0.0


def greedy_success(arena: Arena, policy: Policy, games: list[dict]) -> float:
    """The training games played as the grader plays the held-out ones (greedy), success %."""
    eps, _ = arena.play([dict(g) for g in games], policy(arena.settings()), policy.count_tokens)
    return 100.0 * sum(episodes.episode_return(e, arena.score_by) for e in eps) / max(1, len(eps))
