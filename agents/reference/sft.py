"""Reference SFT agent: TRL SFTTrainer on the agent split, submit, train further, submit again.

Completions are written in the task's declared answer format (`run_meta.json` `task.answer_format`:
'Answer: Paris', or 'A + B = C\\n#### C' for arithmetic; see `answers.completion_for`) in the same
chat format the grader prompts with. The full model is saved
to `$A2C_OUTPUT_DIR/<name>` and submitted through the workspace's grading client. Forbidden in
`rl-only` mode. Params (specs/agents/ref-sft.yaml `params:`; `a2c run --agent-param NAME=VALUE`):
`steps` (per stage), `stages`, `batch`, `lr`, `max_records`, `threads`.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from a2c.agents.kit import answers, grading, params, training
from a2c.agents.kit.context import AgentContext, log
from a2c.agents.reference import wait_scores

AGENT_ID = "ref-sft"


@dataclass(frozen=True)
class Params:
    """specs/agents/ref-sft.yaml `params:` (each documented and defaulted there)."""
    steps: int
    stages: int
    batch: int
    lr: float
    max_records: int
    threads: int


def build_dataset(ctx: AgentContext, records: list[dict], chat: bool):
    from datasets import Dataset
    rows = []
    fmt = ctx.answer_format          # the task's declared answer format, never a default
    for record in records:
        prompt, completion = ctx.format_prompt(record), answers.completion_for(record, fmt)
        if chat:
            rows.append({"prompt": [{"role": "user", "content": prompt}],
                         "completion": [{"role": "assistant", "content": completion}]})
        else:
            rows.append({"prompt": prompt, "completion": " " + completion})
    return Dataset.from_list(rows)


def sft_config(out: Path, steps: int, batch: int, lr: float, seed: int, max_length: int = 256):
    from trl import SFTConfig
    return SFTConfig(output_dir=str(out), max_steps=steps, per_device_train_batch_size=batch,
                     gradient_accumulation_steps=1, learning_rate=lr, lr_scheduler_type="constant",
                     warmup_steps=0, logging_steps=5, save_strategy="no", report_to="none",
                     use_cpu=True, bf16=False, fp16=False, seed=seed, max_length=max_length,
                     disable_tqdm=True, dataloader_num_workers=0,
                     # TRL turns it on by default; for a small model on the CPU it only adds a
                     # second forward pass per step (~25% of the step), memory is no constraint
                     gradient_checkpointing=False)


load_model = training.load_model


def train_sft(ctx: AgentContext, model, tokenizer, records: list[dict], steps: int, batch: int,
              lr: float, seed: int, tag: str, stop_at: float | None = None):
    from trl import SFTTrainer
    chat = ctx.use_chat and bool(getattr(tokenizer, "chat_template", None))
    dataset = build_dataset(ctx, records, chat)
    trainer = SFTTrainer(model=model, args=sft_config(ctx.workspace / "tmp" / tag, steps, batch,
                                                      lr, seed),
                         train_dataset=dataset, processing_class=tokenizer,
                         callbacks=[training.time_limit_callback(stop_at)] if stop_at else None)
    start = time.time()
    result = trainer.train()
    elapsed = time.time() - start
    steps = max(1, trainer.state.global_step)
    log(f"{tag}: {steps} SFT steps in {elapsed:.1f}s, loss {result.training_loss:.4f}",
        event="train", stage=tag, steps=steps, seconds=elapsed, loss=result.training_loss)
    return trainer.model, elapsed / steps, steps


def main(argv: list[str] | None = None) -> int:
    ctx = AgentContext.from_env()
    if ctx.mode == "rl-only":
        log("mode rl-only forbids plain SFT: the SFT reference agent does nothing in this mode")
        return 3
    p = params.typed(AGENT_ID, Params)
    training.set_threads(p.threads)
    steps, stages, batch, lr = p.steps, p.stages, p.batch, p.lr
    records = ctx.load_train()
    random.Random(ctx.seed).shuffle(records)
    # the records the steps can use (twice over): tokenizing all 2,000 of arith's costs ~10 s a
    # stage on a loaded 2-core machine for records no step reaches
    limit = p.max_records or 2 * steps * batch * stages
    records = records[:limit]
    log(f"SFT agent: {len(records)} training records, base model {ctx.base_model}, "
        f"mode {ctx.mode}, {ctx.remaining():.0f}s left", event="start")
    start_time = time.time()
    model, tokenizer = load_model(ctx.base_model)
    submitted: list[str] = []
    total = ctx.deadline - start_time
    margin = training.submit_margin(ctx, total)
    for stage in range(1, stages + 1):
        left = ctx.deadline - margin - time.time()
        if left < 5:
            log(f"stage {stage}: not enough time left ({ctx.remaining():.0f}s), stopping")
            break
        # the first stage may use at most 60% of what is left, so a score exists early
        stop_at = time.time() + (0.6 * left if stage < stages else left)
        model, _, done = train_sft(ctx, model, tokenizer, records, steps, batch, lr,
                                   ctx.seed + stage, f"sft-stage{stage}", stop_at=stop_at)
        out = training.save_model(model, tokenizer, ctx.output_dir / f"sft-stage{stage}")
        grading.record_hyperparameters(ctx, method="SFT", stage=stage, steps=done,
                                      max_steps=steps, batch_size=batch, learning_rate=lr,
                                      stopped_by_clock=done < steps)
        sub = grading.submit(ctx, out, note=f"SFT stage {stage}: {done} steps, batch {batch}, "
                                           f"lr {lr}")
        if sub is not None:
            submitted.append(sub)
    wait_scores(ctx, submitted)     # never later than EXIT_MARGIN_S before the deadline
    log(f"SFT agent done: {len(submitted)} submissions", event="done")
    return 0 if submitted else 1


if __name__ == "__main__":
    from a2c.agents.reference import exit_promptly
    exit_promptly(main())   # no interpreter teardown: gone before the deadline
