"""Lockstep-batched vs one-episode-at-a-time evaluation of a level-3 task (same games, same model).

    nice -n 15 .venv/bin/python benchmarks/bench_lockstep.py [--task textquest] [--model smollm2-135m-instruct]
        [--games 12] [--repeat 1] [--json OUT.json]

Plays the task's held-out games with the rollout grader twice: `lockstep=True` (every live
episode's prompt in one batched `generate` per step) and `lockstep=False` (one episode after the
other, one prompt per call). Prints both wall times and their ratio, and asserts that both modes
give the same success rate and (in float32) the same trajectories (greedy decoding). The model is
loaded once, the way the task's grader loads it (`grader.env.options`: dtype, prefix cache) unless
`--dtype` / `--no-prefix-cache`; the prefix cache is emptied before each mode, so neither mode
reuses the other's work. Per mode it prints the prompt tokens the model computed and the ones it
reused from the cache.
In bfloat16, batched and single generation are not bit-identical (padding changes the
accumulation order), so trajectories may differ there: they are counted, not asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="textquest", help="a generated level-3 bundle id")
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="builtin model name or a model folder")
    parser.add_argument("--split", default="heldout", choices=["heldout", "agent"],
                        help="which games: the grader's held-out split or the agent's training "
                             "split (more games: a bigger batch per step)")
    parser.add_argument("--games", type=int, default=0, help="first N games (0: all)")
    parser.add_argument("--dtype", help="override the grader's dtype (e.g. float32)")
    parser.add_argument("--engine", default="transformers", choices=["transformers", "vllm"],
                        help="inference engine (vllm: run inside the `nox -s vllm` venv)")
    parser.add_argument("--min-ratio", type=float, default=1.0,
                        help="fail when lockstep is not at least this many times faster")
    parser.add_argument("--max-new-tokens", type=int,
                        help="override the grader's max_new_tokens (a policy that thinks aloud "
                             "before acting, as in ReAct, generates tens of tokens per step)")
    parser.add_argument("--no-stop", action="store_true",
                        help="drop the grader's stop sequences (generate max_new_tokens each step)")
    parser.add_argument("--no-prefix-cache", action="store_true",
                        help="recompute every prompt in full at every step (the old way)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)

    from a2c.contracts.spec import TaskSpec
    from a2c.runtime import data as data_mod
    from a2c.runtime import models
    from a2c.runtime.envs.rollout_grader import RolloutGrader, policy_engine_kwargs, token_counter
    from a2c.runtime.inference import load_engine

    bundle = ROOT / "generated" / args.task
    task = json.loads((bundle / "bundle.json").read_text())["task"]
    records = data_mod.load_split(TaskSpec.from_dict(task), args.split, bundle)
    if args.games:
        records = records[: args.games]
    grader_cfg = json.loads(json.dumps(task["grader"]))
    grader_cfg["env"]["data_root"] = str(data_mod.data_root(TaskSpec.from_dict(task), bundle))
    grader = RolloutGrader(grader_cfg)
    model_path = Path(args.model) if Path(args.model).is_dir() else \
        Path(models.resolve_base_model({"builtin": args.model}, bundle))
    options = dict(grader.options)
    if args.dtype:
        options["dtype"] = args.dtype
    if args.no_prefix_cache:
        options["prefix_cache_mb"] = 0
    dtype = options.get("dtype")
    backend = load_engine(model_path, args.engine, **policy_engine_kwargs(options))
    reset_cache = getattr(backend, "reset_prefix_cache", lambda: None)
    overrides = {}
    if args.max_new_tokens:
        overrides["max_new_tokens"] = args.max_new_tokens
    if args.no_stop:
        overrides["stop"] = ()
    settings = grader.generation_settings(**overrides)
    counter = token_counter(backend)
    calls = {"lockstep": 0, "one-at-a-time": 0}
    model_s = {"lockstep": 0.0, "one-at-a-time": 0.0}

    def policy_for(mode):
        def policy(prompts):
            calls[mode] += 1
            started = time.perf_counter()
            try:
                return backend.generate(prompts, settings)
            finally:
                model_s[mode] += time.perf_counter() - started
        return policy

    # warm-up (untimed): first engine start and first generate pay one-off costs
    grader.grade_policy(lambda prompts: backend.generate(prompts, settings), records[:1],
                        backend_name=backend.name, count_tokens=counter)
    results, times, cache_stats = {}, {}, {}
    for mode, lock in (("lockstep", True), ("one-at-a-time", False)):
        reset_cache()
        started = time.perf_counter()
        results[mode] = grader.grade_policy(policy_for(mode), records, backend_name=backend.name,
                                            count_tokens=counter, lockstep=lock)
        times[mode] = time.perf_counter() - started
        cache = getattr(backend, "prefix_cache", None)
        cache_stats[mode] = cache.stats.to_dict() if cache is not None else None
        c = cache_stats[mode]
        tokens = (f"\n{'':16s}prompt tokens computed {c['computed_tokens']}, reused "
                  f"{c['reused_tokens']}; prefill {c['prefill_s']:.1f} s, decode "
                  f"{c['decode_s']:.1f} s ({c['decode_forwards']} forwards)") if c else ""
        print(f"{mode:14s} {times[mode]:7.1f} s  (model {model_s[mode]:6.1f} s, environment and "
              f"the rest {times[mode] - model_s[mode]:5.1f} s)  {calls[mode]:3d} generate calls  "
              f"success {results[mode].metrics['success_rate']:.1f}%{tokens}", flush=True)
    backend.close()
    ratio = times["one-at-a-time"] / times["lockstep"]
    same_rate = results["lockstep"].score == results["one-at-a-time"].score
    traj = {mode: [(i["id"], i["extracted"], i["won"]) for i in r.items] for mode, r in results.items()}
    same_traj = traj["lockstep"] == traj["one-at-a-time"]
    if all(cache_stats.values()):
        lock, one = cache_stats["lockstep"], cache_stats["one-at-a-time"]
        print(f"where the time goes: prefill {one['prefill_s']:.1f} s one at a time vs "
              f"{lock['prefill_s']:.1f} s lockstep ({_ratio(one['prefill_s'], lock['prefill_s'])}; "
              f"compute-bound on a CPU), decode {one['decode_s']:.1f} s vs {lock['decode_s']:.1f} s "
              f"({_ratio(one['decode_s'], lock['decode_s'])})")
    prefix = "off" if args.no_prefix_cache else "on"
    print(f"games {len(records)} ({args.split}), model {model_path.name} ({dtype or 'default dtype'}, "
          f"{backend.name}, prefix cache {prefix}), "
          f"max_steps {grader.rollout_cfg.max_steps}: lockstep is {ratio:.1f}x faster; "
          f"same success rate: {same_rate}; same trajectories: {same_traj}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "games": len(records), "model": str(model_path), "dtype": dtype, "seconds": times,
            "model_seconds": model_s, "calls": calls, "ratio": ratio,
            "prefix_cache": cache_stats, "max_new_tokens": settings.max_new_tokens, "success_rate": {m: r.score for m, r in results.items()},
            "same_trajectories": same_traj}, indent=2) + "\n")
    assert same_rate, "lockstep and one-at-a-time success rates differ"
    if (dtype or "float32") == "float32":
        assert same_traj, "lockstep and one-at-a-time trajectories differ"
    elif not same_traj:   # bf16/fp16: padding changes the accumulation order; greedy may flip
        n_diff = sum(a != b for a, b in zip(traj["lockstep"], traj["one-at-a-time"]))
        print(f"note: {n_diff} of {len(records)} trajectories differ in {dtype} (not bit-identical "
              f"batched vs single); run with --dtype float32 for the identity check")
    assert ratio >= args.min_ratio, f"lockstep only {ratio:.2f}x faster (< {args.min_ratio})"
    return 0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "n/a"


if __name__ == "__main__":
    sys.exit(main())
