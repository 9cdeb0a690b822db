"""Lockstep rollouts: every live episode's prompt goes to the policy in one batch per step.

    run_rollouts(records, env_factory, fmt, policy, config, lockstep=True) -> list[Episode]

`policy(prompts)` maps a list of chat-message prompts to one output each (the inference engine's
`generate` with greedy settings). With `lockstep=False` the episodes are played one after another,
one prompt per call: the same prompts and (greedy) the same results, only slower — the benchmark
`benchmarks/bench_lockstep.py` measures both.

An episode ends when the environment says done, after `max_steps` actions, or as *failed* with a
reason: `bad_action: ...` (no parseable action), `env_crash: ...` (the engine raised, the game file
is missing, the service is down) or `timeout: ...` (a step or the episode ran past its limit).
A failed episode scores 0; the other episodes and the evaluation go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from a2c.contracts.env_info import StepInfo
from a2c.contracts.spec import RolloutEnvSpec
from a2c.runtime.envs.base import BadAction, Env, EnvBatch, Episode, Transition
from a2c.runtime.envs.prompts import PromptFormat, Turn, approx_tokens


@dataclass
class RolloutConfig:
    max_steps: int = 50
    max_tokens: int | None = 2048          # history budget of a prompt (spec: env.history.max_tokens)
    keep_first_turns: int = 0              # spec: env.history.keep_first_turns
    step_timeout_s: float | None = 60.0
    episode_timeout_s: float | None = None
    max_workers: int = 8

    @classmethod
    def from_env_cfg(cls, env_cfg: dict) -> RolloutConfig:
        """From grader.json's `env` object as a script reads it (the boundary; see `from_env`)."""
        return cls.from_env(RolloutEnvSpec.from_dict(env_cfg))

    @classmethod
    def from_env(cls, env: RolloutEnvSpec) -> RolloutConfig:
        hist = env.history or {}
        opts = env.options or {}
        return cls(max_steps=int(env.max_steps),
                   max_tokens=hist.get("max_tokens", 2048),
                   keep_first_turns=int(hist.get("keep_first_turns", hist.get("keep_first", 0)) or 0),
                   step_timeout_s=opts.get("step_timeout_s", 60.0),
                   episode_timeout_s=opts.get("episode_timeout_s"),
                   max_workers=int(opts.get("max_workers", 8)))


class _State:
    def __init__(self, rec: dict):
        self.episode = Episode(id=str(rec.get("id")))
        self.turns: list[Turn] = []
        self.info: dict = {}               # the environment's last info, as the format reads it
        self.reply = StepInfo()            # the same, as the rollout reads it
        self.obs: str = ""
        self.started = time.monotonic()


def _prompt(fmt: PromptFormat, st: _State, cfg: RolloutConfig, count_tokens) -> list[dict]:
    return fmt.messages(st.episode.task, st.episode.first_observation, st.turns, st.info,
                        max_tokens=cfg.max_tokens, keep_first_turns=cfg.keep_first_turns,
                        count_tokens=count_tokens)


def _play(records: list[dict], env_factory: Callable[[dict], Env], fmt: PromptFormat,
          policy: Callable[[list], list[str]], cfg: RolloutConfig, count_tokens,
          on_step: Callable[[int, int], None] | None, record_prompts: bool = False) -> list[Episode]:
    states = [_State(r) for r in records]
    batch = EnvBatch([(lambda r=r: env_factory(r)) for r in records],
                     step_timeout_s=cfg.step_timeout_s, max_workers=cfg.max_workers)
    try:
        for i, (res, err) in sorted(batch.reset().items()):
            st = states[i]
            if err:
                st.episode.failure, st.episode.done = err, True
                continue
            obs, info = res
            st.info, st.reply, st.obs = info, StepInfo.from_dict(info), obs
            st.episode.task = st.reply.task or str(records[i].get("prompt") or "")
            st.episode.first_observation = obs
        step = 0
        while True:
            live = [i for i, st in enumerate(states) if not st.episode.done]
            if not live:
                break
            if step >= cfg.max_steps:
                for i in live:
                    states[i].episode.done = True
                    states[i].episode.info["stopped"] = "max_steps"
                break
            prompts = [_prompt(fmt, states[i], cfg, count_tokens) for i in live]
            if record_prompts:     # the exact prompt of every step (training data for agents)
                for i, p in zip(live, prompts):
                    states[i].episode.info.setdefault("prompts", []).append(p)
            outputs = policy(prompts)
            if len(outputs) != len(prompts):
                raise RuntimeError(f"policy returned {len(outputs)} outputs for {len(prompts)} prompts")
            actions: dict[int, str] = {}
            raw: dict[int, str] = {}
            for i, out in zip(live, outputs):
                raw[i] = out
                try:
                    actions[i] = fmt.parse_action(out)
                except BadAction as exc:
                    st = states[i]
                    st.episode.steps.append(Transition(st.obs, "", 0.0, out))
                    st.episode.failure, st.episode.done = f"bad_action: {exc}", True
            for i, (res, err) in sorted(batch.step(actions).items()):
                st = states[i]
                if err is None and cfg.episode_timeout_s is not None and \
                        time.monotonic() - st.started > cfg.episode_timeout_s:
                    err = f"timeout: episode ran past {cfg.episode_timeout_s}s"
                if err:
                    st.episode.steps.append(Transition(st.obs, actions[i], 0.0, raw[i]))
                    st.episode.failure, st.episode.done = err, True
                    batch.close_one(i)
                    continue
                obs, reward, done, info = res
                st.episode.steps.append(Transition(st.obs, actions[i], float(reward), raw[i]))
                st.turns.append(Turn(actions[i], obs))
                st.info, st.reply, st.obs = info, StepInfo.from_dict(info), obs
                if done:
                    st.episode.done = True
            for i, st in enumerate(states):
                if st.episode.done and batch.envs[i] is not None:
                    batch.close_one(i)
            step += 1
            if on_step:
                on_step(step, len(live))
    finally:
        batch.close()
    for st in states:
        ep = st.episode
        ep.won = st.reply.won and ep.failure is None
        if ep.failure is not None:
            ep.reward = 0.0
        elif st.reply.final_reward is not None:
            ep.reward = st.reply.final_reward
        else:
            ep.reward = float(sum(t.reward for t in ep.steps))
            if st.reply.max_score:
                ep.reward = ep.reward / st.reply.max_score
    return [s.episode for s in states]


def run_rollouts(records: list[dict], env_factory: Callable[[dict], Env], fmt: PromptFormat,
                 policy: Callable[[list], list[str]], config: RolloutConfig | None = None, *,
                 lockstep: bool = True, count_tokens: Callable[[str], int] = approx_tokens,
                 on_step: Callable[[int, int], None] | None = None,
                 record_prompts: bool = False) -> list[Episode]:
    """`record_prompts`: keep each step's prompt messages in `episode.info["prompts"]`."""
    cfg = config or RolloutConfig()
    if lockstep:
        return _play(records, env_factory, fmt, policy, cfg, count_tokens, on_step, record_prompts)
    episodes: list[Episode] = []
    for rec in records:
        episodes.extend(_play([rec], env_factory, fmt, policy, cfg, count_tokens, on_step,
                              record_prompts))
    return episodes
