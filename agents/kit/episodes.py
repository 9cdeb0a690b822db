"""From played episodes to RL training data: group-relative advantages over episode returns,
the informative groups, and an episode packed as one multi-turn completion for TRL.

Pure functions (a tokenizer is the only outside object), so the level-3 RL agent's arithmetic is
tested without a model or an environment (`tests/reference_agents/test_l3_rl.py`).

*GRPO over episode returns*: every training game is played G times with the current policy; an
episode's return is its score (won: 1/0 on TextWorld, or the environment's reward); the advantage
of an episode is its return minus the mean of its game's G returns, over their standard
deviation. A game whose G episodes all scored the same gives no gradient (every advantage is 0),
so `informative` drops it before any compute is spent on it — DAPO's "dynamic sampling" filter.

*Shaping*: a base model that narrates instead of acting almost never wins, so almost every group
is uniform (all 0) and GRPO has nothing to learn from. `shaped_return` adds a small bonus for the
share of steps whose action was one the environment listed as valid (its own
`admissible_commands`, shown in the prompt), as the arithmetic GRPO agent adds one for the answer
format: a winning episode still scores ~10x more than a valid but losing one.

*Packing*: TRL's GRPOTrainer trains one completion per rollout. A multi-turn episode becomes one
sequence: the first step's prompt, then, for each step, the model's own output (loss on it) and the
environment's answer with the next step's newest user message (no loss: `env_mask` 0) — TRL's
`rollout_func` + `env_mask` route for environment feedback. The first step is exactly the
evaluation prompt; a later step sees every earlier turn, as in the evaluation, except that an
earlier user message keeps its own `Valid actions` list (the evaluation prompt moves that list to
the newest message) and the history is not cut (4 steps of these games fit in the budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Played:
    """One episode as the trainer needs it: the prompt of every step (the evaluation's own
    messages), the raw model output of every step, and the return (`ret`, shaped; `score`, the
    grader's unshaped one, where shaping made them differ)."""
    game: str
    prompts: list[list[dict]]
    outputs: list[str]
    ret: float
    won: bool = False
    score: float | None = None                         # None: `ret` is the grader's return
    valid: list[bool] = field(default_factory=list)   # per step: the action was a listed one

    @property
    def unshaped(self) -> float:
        """The return the grader would give (success rates and the winners use it)."""
        return self.ret if self.score is None else self.score


@dataclass(frozen=True)
class Packed:
    """One episode as TRL's `rollout_func` returns it (see `pack`)."""
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]


def episode_return(episode, score_by: str = "success") -> float:
    """The return the grader would give the episode: 1/0 when scored by success, else its
    reward (0-1); a failed episode (bad action, crash, timeout) returns 0."""
    if episode.failure:
        return 0.0
    return (1.0 if episode.won else 0.0) if score_by == "success" else float(episode.reward)


def valid_steps(episode, admissible: list[list[str]] | None) -> list[bool]:
    """Per step: was the parsed action among the commands the environment listed before it?
    (`admissible[t]`: the list shown at step t; none known: False.)"""
    out = []
    for t, step in enumerate(episode.steps):
        listed = admissible[t] if admissible and t < len(admissible) else None
        out.append(bool(listed) and step.action.strip().lower() in
                   {a.strip().lower() for a in listed})
    return out


def shaped_return(ret: float, valid: list[bool], bonus: float) -> float:
    """The return plus `bonus` x the share of valid steps (0 when no step was taken)."""
    if not valid or bonus <= 0:
        return ret
    return ret + bonus * sum(valid) / len(valid)


def from_episode(game: str, episode, score_by: str = "success",
                 admissible: list[list[str]] | None = None, bonus: float = 0.0) -> Played:
    prompts = list(episode.info.get("prompts") or [])
    outputs = [step.output for step in episode.steps][:len(prompts)]
    valid = valid_steps(episode, admissible)
    ret = episode_return(episode, score_by)
    return Played(game=game, prompts=prompts[:len(outputs)], outputs=outputs,
                  ret=shaped_return(ret, valid, bonus), won=bool(episode.won),
                  score=ret, valid=valid)


def advantages(returns: list[float], eps: float = 1e-4) -> list[float]:
    """GRPO's group-relative advantage: (r - mean) / (std + eps), population std (TRL's
    `scale_rewards="group"` uses the sample std; the sign and the ranking are the same)."""
    n = len(returns)
    if n == 0:
        return []
    mean = sum(returns) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / n)
    if std < eps:
        return [0.0] * n
    return [(r - mean) / (std + eps) for r in returns]


def group_by_game(played: list[Played]) -> dict[str, list[Played]]:
    groups: dict[str, list[Played]] = {}
    for p in played:
        groups.setdefault(p.game, []).append(p)
    return groups


def informative(groups: dict[str, list[Played]]) -> dict[str, list[Played]]:
    """The games whose episodes did not all score the same (the only ones with a gradient)."""
    return {g: eps for g, eps in groups.items()
            if len({round(p.ret, 6) for p in eps}) > 1 and all(p.prompts for p in eps)}


def winners(played: list[Played]) -> list[Played]:
    """Reward-filtered fine-tuning's data: the episodes that won (or scored above 0.5)."""
    return [p for p in played if p.won or p.unshaped > 0.5]


def sft_rows(played: list[Played], parse_action) -> list[dict]:
    """(exact evaluation prompt, parsed action) pairs of every step, for the RFT variant."""
    rows = []
    for p in played:
        for prompt, output in zip(p.prompts, p.outputs):
            try:
                action = parse_action(output)
            except Exception:  # noqa: BLE001 - an unparseable step is not training data
                continue
            rows.append({"prompt": prompt, "completion": [{"role": "assistant",
                                                           "content": action}]})
    return rows


def _render(tokenizer, messages: list[dict], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False,
                                         add_generation_prompt=generation_prompt)


def pack(tokenizer, played: Played) -> Packed:
    """One episode as TRL's rollout_func returns it: `prompt_ids` (the first step's prompt with
    the generation prompt), `completion_ids` (every step's output and the environment's turns)
    and `env_mask` (1 on the model's tokens, including the end of its turn; 0 on the
    environment's). Needs a chat template whose rendering of a conversation starts with the
    rendering of any shorter one (ChatML does); raises ValueError otherwise."""
    if not played.prompts:
        raise ValueError(f"episode of {played.game} has no recorded prompts")
    messages = list(played.prompts[0])
    text = _render(tokenizer, messages, True)
    prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    completion: list[int] = []
    mask: list[int] = []
    eos = tokenizer.eos_token or ""
    for step, output in enumerate(played.outputs):
        messages = messages + [{"role": "assistant", "content": output}]
        after = _render(tokenizer, messages, False)
        if not after.startswith(text):
            raise ValueError("the chat template does not preserve prefixes; cannot pack turns")
        segment = after[len(text):]
        cut = segment.find(eos, len(output)) if eos else -1
        model_part = segment[:cut + len(eos)] if cut >= 0 else segment
        env_part = segment[len(model_part):]
        ids = tokenizer(model_part, add_special_tokens=False)["input_ids"]
        completion += ids
        mask += [1] * len(ids)
        text = after
        if step + 1 < len(played.prompts):
            messages = messages + [played.prompts[step + 1][-1]]
            nxt = _render(tokenizer, messages, True)
            env_part += nxt[len(after):]
            text = nxt
        if env_part:
            ids = tokenizer(env_part, add_special_tokens=False)["input_ids"]
            completion += ids
            mask += [0] * len(ids)
    return Packed(prompt_ids=list(prompt_ids), completion_ids=completion, env_mask=mask)


def strongest(groups: dict[str, list[Played]], limit: int) -> dict[str, list[Played]]:
    """At most `limit` groups, those with the largest spread of returns first (a won episode
    among lost ones before a small shaping difference): the update's cost grows with the
    number of sequences, and one update must fit the time left."""
    if limit <= 0 or len(groups) <= limit:
        return groups
    spread = sorted(groups, key=lambda g: -(max(p.ret for p in groups[g]) -
                                            min(p.ret for p in groups[g])))
    return {g: groups[g] for g in spread[:limit]}
