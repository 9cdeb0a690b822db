"""The simpler variant of `l3_rl`: reward-filtered fine-tuning (RFT) from online rollouts.

    python -m a2c.agents.reference.l3_rft

Same loop as `l3_rl` (the policy plays the training games, sampled; the environment scores every
episode; checks, submissions and budget alike), but the update is supervised: TRL SFT on the
winning episodes' own steps (their exact evaluation prompts and parsed actions), one pass per
iteration. No advantages, no negative signal: the policy imitates its own successes (rejection
sampling / expert iteration). Being supervised it refuses `rl-only` mode (exit 3), and the report
classifies it as RFT + SFT. It lives in its own module so that `l3_rl`'s code, which the report
reads for rl-only compliance, holds no supervised objective.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from a2c.agents.kit import context, episodes, params, training
from a2c.agents.reference import l3_rl


def rft_step(model, tokenizer, played, groups, optimizer, *, lr: float, seed: int,
             work_dir: Path, arena, batch: int = 4) -> dict:
    """TRL SFT on the winners' steps, one pass (`groups` and `optimizer` are unused: no
    advantages, and the trainer's own optimizer)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    rows = episodes.sft_rows(episodes.winners(played), arena.fmt.parse_action)
    if not rows:
        return {}
    steps = max(1, math.ceil(len(rows) / batch))
    args = SFTConfig(output_dir=str(work_dir), max_steps=steps, per_device_train_batch_size=batch,
                     learning_rate=lr, lr_scheduler_type="constant", logging_steps=1,
                     save_strategy="no", report_to="none", use_cpu=True,
                     bf16=training.bf16_ok(params.typed(l3_rl.AGENT_ID, l3_rl.Params).bf16), fp16=False, seed=seed, max_length=640,
                     completion_only_loss=True, disable_tqdm=True, dataloader_num_workers=0,
                     gradient_checkpointing=False)   # CPU: a second forward for no gain
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tokenizer)
    started = time.time()
    result = trainer.train()
    return {"seconds": time.time() - started, "loss": result.training_loss, "rows": len(rows)}


def main(argv: list[str] | None = None) -> int:
    ctx = context.AgentContext.from_env()
    if ctx.mode == "rl-only":
        context.log("mode rl-only forbids supervised updates: reward-filtered fine-tuning does "
                   "nothing in this mode")
        return 3
    return l3_rl.main(argv, update=rft_step, name="RFT")


if __name__ == "__main__":
    from a2c.agents.reference import exit_promptly
    exit_promptly(main())   # no interpreter teardown: gone before the deadline
