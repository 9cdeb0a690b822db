"""Play the training games of `textquest` in the evaluation prompt format; write trajectories.

    python l3/rollout_example.py                          # the base model, greedy, like the grader
    python l3/rollout_example.py --model $A2C_OUTPUT_DIR/model-1 --out model1.jsonl
    python l3/rollout_example.py --expert --out expert.jsonl   # the games' walkthroughs
    python l3/rollout_example.py --temperature 1.0 --seed 3   # sampled, e.g. for rejection sampling / RL

It uses the grader's own code (`a2c.runtime.envs`, importable in this workspace), with the
configuration in `l3/env.json` (textworld, at most 4 steps, the same
history rule and generation settings), so a score measured here on the training split is
measured exactly as the grader measures the held-out split.

Output: one JSON line per step, ready for supervised fine-tuning (TRL's conversational
prompt-completion format) or filtering by outcome:
    {"id", "step", "prompt": [chat messages], "completion": [{"role": "assistant", "content": action}],
     "output": raw model output, "reward": step reward, "won": episode won, "episode_reward"}
and a summary (success rate) on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from a2c.runtime.envs.prompts import get_format
from a2c.runtime.envs.registry import env_factory
from a2c.runtime.envs.rollout import RolloutConfig, run_rollouts

HERE = Path(__file__).resolve().parent


def load_records(path: Path, limit: int | None) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return records[:limit] if limit else records


def expert_policy(record: dict):
    """Replays the record's walkthrough (one episode at a time)."""
    walk = record.get("walkthrough") or [a.strip() for a in str(record.get("answer", "")).split(";")]

    def policy(prompts: list) -> list[str]:
        done = sum(1 for m in prompts[0] if m["role"] == "assistant")
        return [walk[done] if done < len(walk) else "look"]

    return policy


def main(argv: list[str] | None = None) -> int:
    cfg = json.loads((HERE / "env.json").read_text(encoding="utf-8"))
    data_dir = Path(os.environ.get("A2C_DATA_DIR", "."))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.environ.get("A2C_BASE_MODEL"),
                        help="model folder (default: the base model)")
    parser.add_argument("--data", default=str(data_dir / "train.jsonl"),
                        help="records JSONL; game files resolve against its folder")
    parser.add_argument("--out", default="trajectories.jsonl")
    parser.add_argument("--expert", action="store_true", help="play the walkthroughs, no model")
    parser.add_argument("--limit", type=int, default=None, help="first N games only")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature (default: the grader's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", default="transformers",
                        help="inference engine: transformers | vllm | auto")
    args = parser.parse_args(argv)

    records = load_records(Path(args.data), args.limit)
    env_cfg = {k: cfg[k] for k in ("kind", "max_steps", "history", "options") if cfg.get(k) is not None}
    fmt = get_format(cfg["kind"], cfg.get("options"))
    rollout_cfg = RolloutConfig.from_env_cfg(env_cfg)
    factory = env_factory(env_cfg, Path(args.data).resolve().parent)
    started = time.time()
    if args.expert:
        episodes = []
        for rec in records:
            episodes += run_rollouts([rec], factory, fmt, expert_policy(rec), rollout_cfg,
                                     lockstep=False, record_prompts=True)
    else:
        from a2c.runtime.envs.policy import policy_engine_kwargs, token_counter
        from a2c.runtime.inference import GenerationSettings, load_engine

        inference = dict(cfg["inference"], seed=args.seed)
        if args.temperature is not None:
            inference["temperature"] = args.temperature
        settings = GenerationSettings.from_config(inference)
        # the grader's dtype and prefix cache: same numbers, same speed as the evaluation
        backend = load_engine(args.model, args.engine,
                               **policy_engine_kwargs(cfg.get("options") or {}))
        counter = token_counter(backend)
        kwargs = {"count_tokens": counter} if counter else {}
        try:
            # lockstep: every live episode's prompt in one batched generate per step
            episodes = run_rollouts(records, factory, fmt,
                                    lambda prompts: backend.generate(prompts, settings),
                                    rollout_cfg, lockstep=True, record_prompts=True, **kwargs)
        finally:
            backend.close()
    rows = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for ep in episodes:
            for n, (step, prompt) in enumerate(zip(ep.steps, ep.info.get("prompts", []))):
                out.write(json.dumps({
                    "id": ep.id, "step": n, "prompt": prompt,
                    "completion": [{"role": "assistant", "content": step.action}],
                    "output": step.output, "reward": step.reward, "won": ep.won,
                    "episode_reward": ep.reward, "failure": ep.failure}) + "\n")
                rows += 1
    won = sum(1 for ep in episodes if ep.won)
    print(f"{len(episodes)} episodes, {won} won ({100.0 * won / max(1, len(episodes)):.1f}%), "
          f"{rows} steps -> {args.out} in {time.time() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
