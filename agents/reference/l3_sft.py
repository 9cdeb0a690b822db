"""Reference agent for level 3: SFT on expert trajectories, in exactly the evaluation prompt format.

    python -m a2c.agents.reference.l3_sft

1. Reads the environment configuration the bundle gives every level-3 workspace
   (`$A2C_WORKSPACE/l3/env.json`: kind, max_steps, history rule, options) and the training split
   (`$A2C_DATA_DIR/train.jsonl`; game files at the same relative paths).
2. Plays each training game's expert walkthrough through the real environment and records, at every
   step, the prompt the rollout grader would build (`a2c.runtime.envs.prompts`, same history rule)
   and the expert action: (chat prompt, action) pairs.
3. Fine-tunes the base model on them with TRL's SFTTrainer (prompt-completion, loss on the action
   only), saves to `$A2C_OUTPUT_DIR/l3-sft`, submits through the workspace client and waits for the
   score.

Params (specs/agents/ref-l3-sft.yaml `params:`): `steps` (default 20), `batch` (4), `lr` (1e-4),
`max_length` (640), `bf16` (auto: bf16 autocast where the CPU has bf16 instructions; on, off).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

from a2c.agents.kit import context, grading, params, training
from a2c.agents.kit.environments import RolloutConfig, Turn, factory_for, get_format
from a2c.agents.reference import wait_scores
from a2c.contracts.env_info import StepInfo
from a2c.contracts.l3_env_file import L3EnvFile
from a2c.contracts.spec import RolloutEnvSpec


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] l3_sft: {message}", flush=True)


@dataclass(frozen=True)
class ExpertStep:
    """One training row: the evaluation's prompt at a step of a walkthrough, the expert's action
    as the completion, and the game it came from."""
    prompt: list[dict]
    completion: list[dict]
    game: str | None = None


@dataclass(frozen=True)
class Trained:
    """What `train` saved (`out`) and the SFT steps that ran (fewer than asked: the clock)."""
    out: Path
    steps: int


def collect_expert(records: list[dict], env: RolloutEnvSpec, data_root: str | Path,
                   count_tokens=None) -> list[ExpertStep]:
    """(prompt messages, expert action) pairs from playing each record's walkthrough.

    `count_tokens`: the history rule's token counter; the grader counts with the submitted
    model's tokenizer, so pass the base model's to get identical truncation. The history rule
    is the grader's own (`RolloutConfig.from_env`)."""
    fmt = get_format(env.kind, env.options)
    extra = {"count_tokens": count_tokens} if count_tokens else {}
    hist = RolloutConfig.from_env(env)
    factory = factory_for(env, data_root)
    rows: list[ExpertStep] = []
    for rec in records:
        walk = rec.get("walkthrough") or [a.strip() for a in str(rec.get("answer", "")).split(";")]
        game, game_id = factory(rec), rec.get("id")
        try:
            obs, info = game.reset()
            task = StepInfo.from_dict(info).task or rec.get("prompt", "")
            turns: list[Turn] = []
            won = False
            for action in walk:
                msgs = fmt.messages(task, obs, turns, info, max_tokens=hist.max_tokens,
                                    keep_first_turns=hist.keep_first_turns, **extra)
                rows.append(ExpertStep(prompt=msgs, completion=[
                    {"role": "assistant", "content": action}], game=game_id))
                o, _, done, info = game.step(action)
                turns.append(Turn(action, o))
                won = StepInfo.from_dict(info).won
                if done:
                    break
            if not won:
                log(f"walkthrough of {game_id} did not win; its steps are kept anyway")
        finally:
            game.close()
    return rows


bf16_ok = training.bf16_ok
AGENT_ID = "ref-l3-sft"


@dataclass(frozen=True)
class Params:
    """specs/agents/ref-l3-sft.yaml `params:` (each documented and defaulted there)."""
    steps: int
    batch: int
    lr: float
    max_length: int
    bf16: str


def train(base_model: str | Path, rows: list[ExpertStep], out_dir: str | Path, *,
          steps: int = 60, batch: int = 4, lr: float = 5e-5, seed: int = 0,
          max_length: int = 640, work_dir: str | Path | None = None,
          stop_at: float | None = None, bf16: str = "auto") -> Trained:
    """TRL SFT (loss on the completions only); the saved model folder and the steps that ran.
    Training stops before the clock passes `stop_at` (unix seconds)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(base_model)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(base_model)
    data = Dataset.from_list([{"prompt": r.prompt, "completion": r.completion} for r in rows])
    work = Path(work_dir or Path(out_dir).parent / "tmp-l3-sft")
    args = SFTConfig(output_dir=str(work), max_steps=steps, per_device_train_batch_size=batch,
                     gradient_accumulation_steps=1, learning_rate=lr, lr_scheduler_type="constant",
                     warmup_steps=0, logging_steps=10, save_strategy="no", report_to="none",
                     use_cpu=not torch.cuda.is_available(), bf16=bf16_ok(bf16), fp16=False, seed=seed, max_length=max_length,
                     completion_only_loss=True, disable_tqdm=True, dataloader_num_workers=0,
                     # memory for speed only where memory is short (a GPU); on the CPU it costs
                     # a second forward pass per step
                     gradient_checkpointing=torch.cuda.is_available())
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok,
                         callbacks=[training.time_limit_callback(stop_at)] if stop_at else None)
    started = time.time()
    result = trainer.train()
    log(f"{trainer.state.global_step} SFT steps on {len(rows)} expert steps in {time.time() - started:.0f}s, "
        f"loss {result.training_loss:.3f}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trainer.model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return Trained(out=out, steps=trainer.state.global_step)


def main(argv: list[str] | None = None) -> int:
    ctx = context.AgentContext.from_env()
    if ctx.mode == "rl-only":
        log("mode rl-only: this agent only does SFT; nothing to do")
        return 0
    env = L3EnvFile.read(ctx.workspace / "l3" / "env.json").env
    records = ctx.load_train()
    random.Random(ctx.seed).shuffle(records)
    log(f"{len(records)} training games, env {env.kind}")
    from transformers import AutoTokenizer

    from a2c.agents.kit.inference import tokenizer_counter
    tok = AutoTokenizer.from_pretrained(ctx.base_model)
    rows = collect_expert(records, env, ctx.data_dir, count_tokens=tokenizer_counter(tok))
    log(f"collected {len(rows)} expert steps")
    p = params.typed(AGENT_ID, Params)
    steps, batch, lr = p.steps, p.batch, p.lr
    margin = training.submit_margin(ctx, ctx.remaining())
    trained = train(ctx.base_model, rows, ctx.output_dir / "l3-sft", steps=steps, batch=batch,
                    lr=lr, seed=ctx.seed, max_length=p.max_length,
                    work_dir=ctx.workspace / "tmp" / "l3-sft", stop_at=ctx.deadline - margin,
                    bf16=p.bf16)
    grading.record_hyperparameters(ctx, method="SFT", steps=trained.steps, max_steps=steps,
                                  batch_size=batch, learning_rate=lr,
                                  stopped_by_clock=trained.steps < steps)
    sid = grading.submit(ctx, trained.out, note="l3 SFT on expert trajectories")
    if sid:
        reply = wait_scores(ctx, [sid])[0]   # never later than EXIT_MARGIN_S before the deadline
        log(f"submission {sid}: score {reply.get('score')}")
    return 0


if __name__ == "__main__":
    from a2c.agents.reference import exit_promptly
    exit_promptly(main())   # no interpreter teardown: gone before the deadline
