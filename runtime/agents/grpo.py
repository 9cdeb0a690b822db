"""Reference GRPO agent: a short SFT warm-up, then TRL GRPOTrainer with the task's reward.

The reward is the task's own check: 1 when the grader would score the completion right (the
task's answer format and extraction from run_meta.json, read with the grader's own code), else 0,
plus a small bonus when the answer pattern matches at all, so a group is rarely all-zero. Both stages are submitted. `sft-only` mode skips the GRPO stage;
`rl-only` mode skips the SFT warm-up (GRPO starts from the base model). Knobs (environment):
A2C_REF_SFT_STEPS, A2C_REF_GRPO_STEPS, A2C_REF_GENERATIONS, A2C_REF_GRPO_LR, A2C_REF_BATCH.
"""

from __future__ import annotations

import random
import sys
import time

from a2c.runtime.agents import common
from a2c.runtime.agents.common import AgentContext, log
from a2c.runtime.agents.sft import load_model, train_sft


def make_reward(fmt: common.AnswerFormat | str):
    """The task's own check as a reward: 1 when the grader would score the completion right
    against the record's answer (`fmt`: the task's answer format and extraction, or a bare
    pattern for the arithmetic default), plus 0.1 when the pattern reads an answer at all, so a
    group is rarely all-zero."""
    if isinstance(fmt, str):
        fmt = common.AnswerFormat(params={"pattern": fmt, "normalize": "number",
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
               stop_at: float | None = None):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    chat = ctx.use_chat and bool(getattr(tokenizer, "chat_template", None))
    rows = []
    for record in records:
        prompt = ctx.format_prompt(record)
        rows.append({"prompt": [{"role": "user", "content": prompt}] if chat else prompt,
                     "answer": str(record.get("answer", ""))})
    generations = common.env_int("A2C_REF_GENERATIONS", 4)
    batch = common.env_int("A2C_REF_GRPO_BATCH", 8)
    config = GRPOConfig(
        output_dir=str(ctx.workspace / "tmp" / tag), max_steps=steps,
        per_device_train_batch_size=batch, num_generations=generations,
        max_completion_length=common.env_int("A2C_REF_MAX_COMPLETION", 32),
        learning_rate=common.env_float("A2C_REF_GRPO_LR", 5e-6), lr_scheduler_type="constant",
        temperature=1.0, beta=0.0, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, fp16=False, seed=ctx.seed, disable_tqdm=True,
        dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, reward_funcs=[make_reward(ctx.answer_format)],
                          args=config, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer,
                          callbacks=[common.time_limit_callback(stop_at)] if stop_at else None)
    start = time.time()
    result = trainer.train()
    elapsed = time.time() - start
    rewards = [h.get("reward") for h in trainer.state.log_history if "reward" in h]
    steps = trainer.state.global_step
    log(f"{tag}: {steps} GRPO steps in {elapsed:.1f}s, mean reward first {rewards[:1]} "
        f"last {rewards[-1:]}", event="train", stage=tag, steps=steps, seconds=elapsed,
        loss=result.training_loss, rewards=rewards)
    return trainer.model


def main(argv: list[str] | None = None) -> int:
    ctx = AgentContext.from_env()
    common.set_threads()
    records = ctx.load_train()
    random.Random(ctx.seed).shuffle(records)
    limit = common.env_int("A2C_REF_MAX_RECORDS", 0)
    if limit:
        records = records[:limit]
    log(f"GRPO agent: {len(records)} records, mode {ctx.mode}, {ctx.remaining():.0f}s left",
        event="start")
    start_time = time.time()
    margin = common.submit_margin(ctx, ctx.deadline - start_time)
    model, tokenizer = load_model(ctx.base_model)
    submitted = []
    if ctx.mode != "rl-only":
        steps = common.env_int("A2C_REF_SFT_STEPS", 25)
        left = ctx.deadline - margin - time.time()
        stop_at = time.time() + (0.5 * left if ctx.mode != "sft-only" else left)
        model, _, steps = train_sft(ctx, model, tokenizer, records, steps,
                                    common.env_int("A2C_REF_BATCH", 8),
                                    common.env_float("A2C_REF_LR", 5e-5), ctx.seed, "sft-warmup",
                                    stop_at=stop_at)
        out = common.save_model(model, tokenizer, ctx.output_dir / "sft-warmup")
        sub = common.submit(ctx, out, note=f"SFT warm-up: {steps} steps")
        if sub:
            submitted.append(sub)
    else:
        log("mode rl-only: no SFT warm-up")
    if ctx.mode != "sft-only":
        steps = common.env_int("A2C_REF_GRPO_STEPS", 8)
        model = train_grpo(ctx, model, tokenizer, records, steps, "grpo",
                           stop_at=ctx.deadline - margin)
        out = common.save_model(model, tokenizer, ctx.output_dir / "grpo")
        sub = common.submit(ctx, out, note="GRPO after the warm-up")
        if sub:
            submitted.append(sub)
    else:
        log("mode sft-only: the GRPO stage is skipped")
    for sub in submitted:
        common.wait_score(ctx, sub)
    log(f"GRPO agent done: {len(submitted)} submissions", event="done")
    return 0 if submitted else 1


if __name__ == "__main__":
    sys.exit(main())
