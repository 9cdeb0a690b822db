"""Reference GRPO agent: TRL GRPOTrainer with the task's reward, for as long as the budget lasts.

The reward is the task's own check: 1 when the grader would score the completion right (the
task's declared answer format and extraction from run_meta.json, read with the grader's own
code), else 0, plus a small bonus when the answer pattern matches at all, so a group is rarely
all-zero. GRPO runs in stages of `steps` steps, each saved and submitted, until the
budget (less a margin to save and submit) is spent or `stages` stages are done, with one
optimizer kept across stages. In `free` mode an SFT warm-up comes first: the SFT reference agent
run as its own command (`python -m a2c.agents.reference.sft`, one stage, logged by the recorder),
which submits it; GRPO starts from that model. `sft-only`: the warm-up only. `rl-only`: GRPO from
the base model, and nothing supervised is in the code this module runs (the report's compliance
line checks it). Params (specs/agents/ref-grpo.yaml `params:`): `steps` (per stage, 20), `stages`
(0: until the budget ends), `generations`, `lr` (0: 5e-6 after the warm-up, 2e-5 from the base
model), `batch`, `max_completion`, `max_records`, `threads`; the warm-up's `sft_steps`,
`sft_batch`, `sft_lr` (handed to the SFT agent as its `steps`, `batch`, `lr`, one stage).
"""

from __future__ import annotations

import random
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass

from a2c.agents.kit import answers, grading, params, training
from a2c.agents.kit.context import AgentContext, log
from a2c.agents.reference import wait_scores

AGENT_ID = "ref-grpo"


@dataclass(frozen=True)
class Params:
    """specs/agents/ref-grpo.yaml `params:` (each documented and defaulted there)."""
    sft_steps: int
    sft_batch: int
    sft_lr: float
    steps: int
    stages: int
    batch: int
    lr: float
    generations: int
    max_completion: int
    max_records: int
    threads: int


def make_reward(fmt: answers.AnswerFormat | str):
    """The task's own check as a reward: 1 when the grader would score the completion right
    against the record's answer (`fmt`: the task's answer format and extraction, or a bare
    pattern for the arithmetic default), plus 0.1 when the pattern reads an answer at all, so a
    group is rarely all-zero."""
    if isinstance(fmt, str):
        fmt = answers.AnswerFormat(params={"pattern": fmt, "normalize": "number",
                                          "fallback": "none"})

    def exact_match_reward(prompts=None, completions=None, answer=None, **kwargs):
        rewards = []
        for completion, gold in zip(completions, answer):
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            score = 1.0 if fmt.correct(text, gold) else 0.0
            if fmt.found(text or ""):
                score += 0.1
            rewards.append(score)
        return rewards

    return exact_match_reward


def train_grpo(ctx: AgentContext, model, tokenizer, records: list[dict], steps: int, tag: str,
               stop_at: float | None = None, optimizer=None, seed: int | None = None,
               lr: float | None = None):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    chat = ctx.use_chat and bool(getattr(tokenizer, "chat_template", None))
    rows = []
    for record in records:
        prompt = ctx.format_prompt(record)
        rows.append({"prompt": [{"role": "user", "content": prompt}] if chat else prompt,
                     "answer": str(record.get("answer", ""))})
    p = params.typed(AGENT_ID, Params)
    config = GRPOConfig(
        output_dir=str(ctx.workspace / "tmp" / tag), max_steps=steps,
        per_device_train_batch_size=p.batch, num_generations=p.generations,
        max_completion_length=p.max_completion,
        learning_rate=lr or p.lr or 5e-6, lr_scheduler_type="constant",
        temperature=1.0, beta=0.0, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, fp16=False, seed=ctx.seed if seed is None else seed,
        gradient_checkpointing=False, disable_tqdm=True, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, reward_funcs=[make_reward(ctx.answer_format)],
                          args=config, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer,
                          callbacks=[training.time_limit_callback(stop_at)] if stop_at else None,
                          optimizers=(optimizer, None))
    start = time.time()
    result = trainer.train()
    elapsed = time.time() - start
    rewards = [h.get("reward") for h in trainer.state.log_history if "reward" in h]
    steps = trainer.state.global_step
    log(f"{tag}: {steps} GRPO steps in {elapsed:.1f}s, mean reward first {rewards[:1]} "
        f"last {rewards[-1:]}", event="train", stage=tag, steps=steps, seconds=elapsed,
        loss=result.training_loss, rewards=rewards)
    return trainer.model, steps, rewards


def warm_up(ctx: AgentContext):
    """The SFT warm-up as its own logged command: the SFT reference agent, one stage (it saves
    `$A2C_OUTPUT_DIR/sft-stage1`, submits and waits for the score)."""
    command = f"{shlex.quote(sys.executable)} -m a2c.agents.reference.sft"
    p = params.typed(AGENT_ID, Params)
    env = params.sub_agent_env({"steps": p.sft_steps, "stages": 1, "batch": p.sft_batch,
                                "lr": p.sft_lr, "max_records": p.max_records,
                                "threads": p.threads})
    log(f"warm-up: {command}", event="warmup")
    proc = subprocess.run(["bash", "-c", command], cwd=ctx.workspace, env=env)
    out = ctx.output_dir / "sft-stage1"
    if proc.returncode != 0 or not (out / "config.json").is_file():
        log(f"warm-up failed (rc {proc.returncode}); GRPO starts from the base model")
        return None
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    ctx = AgentContext.from_env()
    p = params.typed(AGENT_ID, Params)
    training.set_threads(p.threads)
    records = ctx.load_train()
    random.Random(ctx.seed).shuffle(records)
    limit = p.max_records
    if limit:
        records = records[:limit]
    log(f"GRPO agent: {len(records)} records, mode {ctx.mode}, {ctx.remaining():.0f}s left",
        event="start")
    start_time = time.time()
    margin = training.submit_margin(ctx, ctx.deadline - start_time)
    max_subs = int((ctx.meta.get("budget") or {}).get("max_submissions") or 10)
    start_dir = ctx.base_model
    if ctx.mode != "rl-only":
        warmed = warm_up(ctx)
        if ctx.mode == "sft-only":
            log("mode sft-only: the GRPO stage is skipped")
            return 0 if warmed else 1
        if warmed:
            start_dir, max_subs = warmed, max_subs - 1
            grading.remember_submitted(warmed)   # removed once GRPO submits (the grader has it)
    else:
        log("mode rl-only: no SFT warm-up")
    model, tokenizer = training.load_model(start_dir)
    steps, stages = p.steps, p.stages
    # from a warm-up, small steps keep what SFT taught; from the base model (rl-only) the format
    # itself must be found by sampling, so larger ones
    lr = p.lr or (5e-6 if start_dir != ctx.base_model else 2e-5)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    submitted, done_steps, stage, stage_s = [], 0, 0, 0.0
    while len(submitted) < max_subs and (not stages or stage < stages):
        left = ctx.deadline - margin - time.time()
        if left < max(20.0, 0.5 * stage_s):
            break
        stage += 1
        began = time.time()
        # a new seed a stage: the trainer draws another order of the records
        model, ran, rewards = train_grpo(ctx, model, tokenizer, records, steps, f"grpo-{stage}",
                                         stop_at=ctx.deadline - margin, optimizer=optimizer,
                                         seed=ctx.seed + stage, lr=lr)
        stage_s = time.time() - began
        if ran == 0:
            break
        done_steps += ran
        out = training.save_model(model, tokenizer, ctx.output_dir / f"grpo-{stage}")
        grading.record_hyperparameters(ctx, method="GRPO", stage=stage, steps=done_steps,
                                      max_steps=steps * stage, learning_rate=lr,
                                      stopped_by_clock=ran < steps)
        tail = sum(rewards[-5:]) / max(1, len(rewards[-5:]))
        after = " after the SFT warm-up" if start_dir != ctx.base_model else ""
        sub = grading.submit(ctx, out, note=f"GRPO stage {stage}: {done_steps} steps{after}, "
                                           f"recent mean reward {tail:.3f}")
        if sub:
            submitted.append(sub)
    wait_scores(ctx, submitted)     # never later than EXIT_MARGIN_S before the deadline
    log(f"GRPO agent done: {stage} stages, {done_steps} GRPO steps, {len(submitted)} "
        f"submissions, {ctx.remaining():.0f}s left", event="done")
    return 0 if submitted else 1


if __name__ == "__main__":
    from a2c.agents.reference import exit_promptly
    exit_promptly(main())   # no interpreter teardown: gone before the deadline
