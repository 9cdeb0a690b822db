"""Reference agent for level 3 by online RL: the policy plays the training games, the environment
rewards it, GRPO updates it from its own episodes.

    python -m a2c.agents.reference.l3_rl

It uses only what the workspace gives any agent: `l3/env.json` (environment kind, step limit,
history rule, generation settings), the prompt format the grader uses (`a2c.runtime.envs`, the
same code `l3/rollout_example.py` runs) and the training games (`$A2C_DATA_DIR/train.jsonl`).

Loop, while the budget lasts (each iteration):
1. copy the current weights into the rollout engine (a bf16 copy: ~3-5x faster sampling on a CPU
   with bf16 instructions, float32 on one without, where bf16 is ~5x slower; the trainer keeps
   float32 weights);
2. play `games` training games `group` times each, sampled at
   `temperature`, lockstep (one batched generate per step for all live episodes), in
   exactly the evaluation prompt format; epsilon-greedy exploration: a share of the steps (0.5,
   decaying) takes a random one of the listed valid actions instead (sampled, the base model
   won none of 32 episodes and took no valid action in them: no return to learn from);
3. GRPO over episode returns (`episodes.py`): games whose episodes all scored alike carry no
   gradient and are dropped; the rest go to TRL's `GRPOTrainer`, whose `rollout_func` hands it the
   recorded episodes packed as multi-turn completions (`env_mask`: loss on the model's tokens only)
   and whose reward function returns each episode's return; TRL computes the group advantages and
   the clipped policy-gradient loss, one optimizer step an iteration (on-policy; more,
   PPO-style, with `minibatches`), with one AdamW kept across
   iterations over the upper half of the layers (the lower half and the embeddings frozen: their
   backward pass is never computed);
4. every `check_every` iterations, play the training games greedily (as the grader
   plays the held-out ones); when that success rate beats the best so far, save and submit.

Modes: `rl-only` starts from the base model, and no supervised objective is anywhere in the code
it runs (this module imports none; the report's compliance line checks it). `free` first launches
`ref-l3-sft` as its own command (`python -m a2c.agents.reference.l3_sft`, which the recorder logs, so
the report names the warm-up), which trains on the walkthroughs and submits — the paper's best
route —, then runs RL from that model. `sft-only`: the warm-up only. `warmup=false` skips the
warm-up in free mode. The simpler variant, reward-filtered fine-tuning on the winning episodes'
own steps, is `python -m a2c.agents.reference.l3_rft` (supervised, so it refuses rl-only mode).

Params (specs/agents/ref-l3-rl.yaml `params:`, where each is documented; `a2c run --agent-param
NAME=VALUE`):
- `games` (8), `group` (4): games an iteration, episodes a game (32 episodes, ~50 s of rollouts
  on 2 cores);
- `temperature` (1.0); `lr` (2e-4: on textquest-short's 12-minute runs 1e-4 gained in one of two
  seeds, 2e-4 in three of three);
- `freeze` (0.5): the share of decoder layers frozen from the bottom, with the embeddings;
- `minibatches` (1): optimizer steps an update (more reuse the rollouts PPO-style; at lr 1e-4 the
  second step's ratio exploded in a probe, loss 3458);
- `micro` (4): micro-batch rows; `max_groups` (8): informative games an update, the widest
  return spread first (all 8 games x 4 episodes: ~90 s at load ~2; 4 of them ~45 s, but with
  half the signal the measured run learned far less in the same budget);
- `explore` / `explore_decay` / `explore_min` (0.5, 0.85 an iteration, 0.1): the share of steps
  that take a random listed action instead of the model's;
- `valid_bonus` (0.1): return bonus x the share of the episode's actions the environment listed
  as valid (0: no shaping); `valid_until` (0.8): the bonus ends for good once the model's own
  actions (explored steps not counted) are valid this often in an iteration — the format is
  learned, and a bonus kept beyond that was measured to pull the policy onto one always-valid
  action (`inventory` at every step) instead of the quest's;
- `max_iters` (0: until the budget ends), `check_every` (2), `check_games` (16; 0: all training
  games), `warmup` (true); the warm-up gets `sft_steps`, `sft_batch`, `sft_lr`, `sft_max_length`
  as ref-l3-sft's `steps`, `batch`, `lr`, `max_length`; `bf16` (auto) for both; `threads`.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from a2c.agents.kit import context, episodes, grading, params, training
from a2c.agents.kit.context import log
from a2c.agents.reference import wait_scores
from a2c.agents.reference.l3_arena import (
    Arena,
    Policy,
    greedy_success,
    own_valid_share,
    play_groups,
    rollout_options,
)

AGENT_ID = "ref-l3-rl"


@dataclass(frozen=True)
class Params:
    """specs/agents/ref-l3-rl.yaml `params:` (each documented and defaulted there)."""
    warmup: bool
    sft_steps: int
    sft_batch: int
    sft_lr: float
    sft_max_length: int
    bf16: str
    threads: int
    lr: float
    freeze: float
    games: int
    group: int
    temperature: float
    valid_bonus: float
    valid_until: float
    max_groups: int
    explore: float
    explore_decay: float
    explore_min: float
    max_iters: int
    check_every: int
    check_games: int
    micro: int
    minibatches: int


def grpo_step(model, tokenizer, groups: dict[str, list[episodes.Played]], optimizer, *, lr: float,
              seed: int, work_dir: Path, micro: int = 4, minibatches: int = 1,
              bf16: str = "auto") -> dict:
    """One GRPO update with TRL's GRPOTrainer over the recorded episode groups: the episodes
    are one generation batch, split into `minibatches` optimizer steps (PPO's minibatches: TRL
    then computes the rollout policy's log-probabilities once and clips the ratio of the later
    steps; on 2 CPU cores an update costs ~6 s a sequence, so several steps from one batch of
    rollouts learn more per second than one)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    group = len(next(iter(groups.values())))
    packed = {key: [episodes.pack(tokenizer, p) for p in eps] for key, eps in groups.items()}
    returns = {key: [p.ret for p in eps] for key, eps in groups.items()}
    by_prompt = {json.dumps(eps[0].prompts[0], sort_keys=True): key for key, eps in groups.items()}
    served: dict[str, int] = {}

    def rollout_func(prompts, trainer):
        """The episodes this generation batch asks for, already played (TRL calls it with each
        game's prompt repeated `num_generations` times)."""
        items, episode_return = [], []
        for prompt in prompts:
            key = by_prompt[json.dumps(prompt, sort_keys=True)]
            k = served.get(key, 0) % group
            served[key] = k + 1
            items.append(packed[key][k])
            episode_return.append(returns[key][k])
        return {"prompt_ids": [i.prompt_ids for i in items],
                "completion_ids": [i.completion_ids for i in items], "logprobs": None,
                "env_mask": [i.env_mask for i in items], "episode_return": episode_return}

    def environment_return(prompts=None, completions=None, episode_return=None, **kwargs):
        """The reward is the environment's: the episode's return."""
        return [float(r) for r in episode_return]

    rows = [{"prompt": groups[key][0].prompts[0]} for key in groups]
    micro = max(1, min(micro, group))
    while group % micro:
        micro -= 1
    per_batch = len(rows) * group // micro             # micro-batches in the generation batch
    steps = max(1, min(minibatches, per_batch))
    while per_batch % steps:
        steps -= 1
    accumulation = per_batch // steps
    longest = max(len(i.completion_ids) for v in packed.values() for i in v)
    config = GRPOConfig(
        output_dir=str(work_dir), max_steps=steps, per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation, steps_per_generation=per_batch,
        num_generations=group,
        max_completion_length=longest + 1, learning_rate=lr, lr_scheduler_type="constant",
        beta=0.0, num_iterations=1, gradient_checkpointing=False, logging_steps=1,
        save_strategy="no", report_to="none",
        use_cpu=True, bf16=training.bf16_ok(bf16), fp16=False, seed=seed, disable_tqdm=True,
        dataloader_num_workers=0, shuffle_dataset=False)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = GRPOTrainer(model=model, reward_funcs=[environment_return], args=config,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          rollout_func=rollout_func, optimizers=(optimizer, None))
    started = time.time()
    result = trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    return {"seconds": time.time() - started, "loss": result.training_loss,
            "reward": logs[-1].get("reward") if logs else None,
            "sequences": len(rows) * group, "optimizer_steps": steps}


def warm_up(ctx) -> Path | None:
    """The free-mode warm-up: `ref-l3-sft` run as its own logged command (it trains on the
    walkthroughs, saves to `$A2C_OUTPUT_DIR/l3-sft`, submits and waits for its score)."""
    command = f"{shlex.quote(sys.executable)} -m a2c.agents.reference.l3_sft"
    log(f"warm-up: {command}", event="warmup")
    p = params.typed(AGENT_ID, Params)
    env = params.sub_agent_env({"steps": p.sft_steps, "batch": p.sft_batch, "lr": p.sft_lr,
                                "max_length": p.sft_max_length, "bf16": p.bf16})
    proc = subprocess.run(["bash", "-c", command], cwd=ctx.workspace, env=env)
    out = ctx.output_dir / "l3-sft"
    if proc.returncode != 0 or not (out / "config.json").is_file():
        log(f"warm-up failed (rc {proc.returncode}); RL starts from the base model", event="note")
        return None
    return out


def default_update(model, tokenizer, played, groups, optimizer, *, lr, seed, work_dir, arena):
    """GRPO over episode returns (this agent's update)."""
    if not groups:
        return {}
    p = params.typed(AGENT_ID, Params)
    return grpo_step(model, tokenizer, groups, optimizer, lr=lr, seed=seed, work_dir=work_dir,
                     micro=p.micro, minibatches=p.minibatches, bf16=p.bf16)


def freeze_lower(model, share: float) -> int:
    """Freeze the embeddings and the lowest `share` of the decoder layers (their backward pass is
    then never computed: ~1.5x cheaper updates at share 0.5); returns the layers frozen. The
    tied output head stays frozen with the embeddings."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if share <= 0 or layers is None:
        return 0
    count = min(len(layers) - 1, int(round(share * len(layers))))
    model.get_input_embeddings().requires_grad_(False)
    for layer in list(layers)[:count]:
        layer.requires_grad_(False)
    return count


def load_trainable(path: Path):
    """(float32 model, tokenizer padded on the left, as GRPOTrainer wants) from a folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), tokenizer


def write_history(ctx, history: list[dict]) -> None:
    """The per-iteration log, replaced atomically: the loop may be killed at the deadline."""
    path = ctx.workspace / "tmp" / "l3-rl-history.json"
    path.parent.mkdir(exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(json.dumps(history, indent=1))
    os.replace(part, path)


def iterate(ctx, hp: Params, arena, policy, learner, records: list[dict], it: int, cursor: int,
            bonus: float, update, name: str) -> tuple[dict, int, float]:
    """Iteration `it`: play a group of episodes of the next training games, update the model
    from the informative ones; (its history record, the next games' cursor, the valid-action
    bonus from now on: it ends once the model's own actions are valid often enough)."""
    model, tokenizer, optimizer = learner
    t0 = time.time()
    games = [records[(cursor + k) % len(records)]
             for k in range(min(hp.games, len(records)))]
    policy.sync(model)
    explore = max(hp.explore_min, hp.explore * hp.explore_decay ** (it - 1))
    played = play_groups(arena, policy, games, hp.group, hp.temperature,
                         seed=ctx.seed * 1000 + it, bonus=bonus, explore=explore)
    groups = episodes.strongest(episodes.informative(episodes.group_by_game(played)),
                                hp.max_groups)
    rate = 100.0 * sum(e.unshaped for e in played) / max(1, len(played))
    steps = sum(len(e.valid) for e in played)
    valid = 100.0 * sum(sum(e.valid) for e in played) / max(1, steps)
    own_valid = own_valid_share(played, policy.explored)
    if bonus > 0 and own_valid >= hp.valid_until:
        log(f"iteration {it}: the model's own actions are valid {100 * own_valid:.0f}% of "
            f"the time; the valid-action bonus ends", event="note")
        bonus = 0.0
    rollout_s = time.time() - t0
    stats = update(model, tokenizer, played, groups, optimizer, lr=hp.lr, seed=ctx.seed + it,
                   work_dir=ctx.workspace / "tmp" / f"l3-{name.lower()}", arena=arena)
    record = {"iteration": it, "episodes": len(played), "sampled_success": rate,
              "valid_actions": round(valid, 1), "own_valid_actions": round(100 * own_valid, 1),
              "explore": round(explore, 3),
              "informative_games": len(groups), "rollout_s": round(rollout_s, 1),
              **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in stats.items()}}
    log(f"iteration {it}: {len(played)} episodes (explore {explore:.2f}), sampled success "
        f"{rate:.1f}%, valid actions {valid:.0f}% (the model's own {100 * own_valid:.0f}%), "
        f"{len(groups)} informative games, rollouts {rollout_s:.0f}s, update "
        f"{stats.get('seconds', 0):.0f}s", event="iteration", **record)
    return record, cursor + len(games), bonus


def submit_model(ctx, learner, it: int, name: str, lr: float, note: str) -> str | None:
    """Save the model as `l3-rl-<it>`, record what trained it, submit it."""
    model, tokenizer, _ = learner
    out = training.save_model(model, tokenizer, ctx.output_dir / f"l3-rl-{it}")
    grading.record_hyperparameters(ctx, method=name, iterations=it, learning_rate=lr)
    return grading.submit(ctx, out, note=note)


def main(argv: list[str] | None = None, update=None, name: str = "GRPO") -> int:
    import torch

    ctx = context.AgentContext.from_env()
    hp = params.typed(AGENT_ID, Params)
    training.set_threads(hp.threads)
    arena = Arena(ctx.workspace, ctx.data_dir)
    records = ctx.load_train()
    random.Random(ctx.seed).shuffle(records)
    margin = training.submit_margin(ctx, ctx.deadline - time.time())
    max_subs = int((ctx.meta.get("budget") or {}).get("max_submissions") or 5)
    update = update or default_update
    log(f"l3 RL agent: {len(records)} training games, env {arena.env.kind}, mode {ctx.mode}, "
        f"update {name}, {ctx.remaining():.0f}s left", event="start")
    submitted: list[str] = []
    start_dir = ctx.base_model
    if ctx.mode in ("free", "sft-only") and hp.warmup:
        start_dir = warm_up(ctx) or ctx.base_model
        warmed = start_dir != ctx.base_model
    else:
        warmed = False
        log(f"mode {ctx.mode}: no warm-up, RL from the base model", event="note")
    if ctx.mode == "sft-only":
        return 0 if warmed else 1

    torch.manual_seed(ctx.seed)
    model, tokenizer = load_trainable(start_dir)
    policy = Policy(start_dir, rollout_options(arena.env.options or {}, hp.bf16))
    max_subs -= 1 if warmed else 0          # the warm-up submitted once
    lr, frozen = hp.lr, freeze_lower(model, hp.freeze)
    optimizer = torch.optim.AdamW([w for w in model.parameters() if w.requires_grad], lr=lr)
    learner = (model, tokenizer, optimizer)
    log(f"policy: {frozen} lower layers and the embeddings frozen, lr {lr:g}", event="note")
    check_every, check_n = max(1, hp.check_every), hp.check_games
    check_games = records[:check_n] if check_n else records
    best = 0.0          # the base model's (the baseline): nothing to measure
    if warmed:          # the warm-up's, so that only a better RL model is submitted
        best = greedy_success(arena, policy, check_games)
        log(f"start policy: greedy success {best:.1f}% on {len(check_games)} training games",
            event="check", success=best, iteration=0)
    last_submitted_iter, it, cursor, costs, history = 0, 0, 0, [], []
    bonus = hp.valid_bonus
    while True:
        left = ctx.deadline - margin - time.time()
        expected = 1.3 * max(costs[-3:], default=0.0)
        if (hp.max_iters and it >= hp.max_iters) or left < expected or left < 10:
            break
        t0 = time.time()
        it += 1
        record, cursor, bonus = iterate(ctx, hp, arena, policy, learner, records, it, cursor,
                                        bonus, update, name)
        history.append(record)
        write_history(ctx, history)      # each iteration: a deadline kill keeps what was done
        if it % check_every == 0 and (record.get("seconds") or 0) > 0:
            policy.sync(model)
            score = greedy_success(arena, policy, check_games)
            log(f"iteration {it}: greedy success {score:.1f}% on training games (best {best:.1f})",
                event="check", success=score, iteration=it)
            if score > best and len(submitted) < max_subs - 1:
                best = score
                sid = submit_model(ctx, learner, it, name, lr,
                                   f"l3 {name} from online rollouts, iteration {it}"
                                   f"{' after the warm-up' if warmed else ''} "
                                   f"(train greedy {score:.1f}%)")
                if sid:
                    submitted.append(sid)
                    last_submitted_iter = it
        costs.append(time.time() - t0)
    if it > last_submitted_iter and history and any(h.get("seconds") for h in history) and \
            len(submitted) < max_subs:
        sid = submit_model(ctx, learner, it, name, lr,
                           f"l3 {name} from online rollouts, final (iteration {it})")
        if sid:
            submitted.append(sid)
    write_history(ctx, history)
    policy.backend.close()
    wait_scores(ctx, submitted)     # never later than EXIT_MARGIN_S before the deadline
    log(f"l3 RL agent done: {it} iterations, {len(submitted)} submissions", event="done")
    return 0 if submitted or warmed else 1


if __name__ == "__main__":
    from a2c.agents.reference import exit_promptly
    exit_promptly(main())   # no interpreter teardown: gone before the deadline
