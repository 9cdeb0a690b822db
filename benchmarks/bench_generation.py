"""Per-item versus batched greedy generation with the transformers engine, same model and prompts.

    python benchmarks/bench_generation.py                 # SmolLM2-135M-Instruct, 100 arith prompts
    python benchmarks/bench_generation.py --model tiny    # quick
    python benchmarks/bench_generation.py --json out.json

Prints the time of generating the 100 held-out arith prompts one at a time and in batches of
`--batch-size` (default: the arith task's 100), their ratio, and whether the outputs are identical
(they must be: batching is only an optimisation). Exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_parity import arith_task, resolve_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="built-in name (tiny, smollm2-135m-instruct) or a model folder")
    parser.add_argument("--n", type=int, default=100, help="number of held-out arith prompts")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    import torch

    from a2c.contracts.spec import TaskSpec
    from a2c.runtime.data import load_split
    from a2c.runtime.inference import GenerationSettings, load_engine

    task, bundle_root = arith_task()
    records = load_split(TaskSpec.from_dict(task), "heldout", bundle_root)[: args.n]
    inference = {k: v for k, v in task["grader"].get("inference", {}).items()
                 if k not in ("engine", "prompt_template")}
    if args.max_new_tokens:
        inference["max_new_tokens"] = args.max_new_tokens
    if args.batch_size:
        inference["batch_size"] = args.batch_size
    batched_settings = GenerationSettings.from_config(inference)
    single_settings = GenerationSettings.from_config({**inference, "batch_size": 1})
    prompts = [r["prompt"] for r in records]
    model = resolve_model(args.model)
    backend = load_engine(model, "transformers")
    print(f"model: {model} ({sum(p.numel() for p in backend.model.parameters()):,} params, "
          f"{backend.device}, {torch.get_num_threads()} torch threads, "
          f"generation threads {backend.cpu_threads or torch.get_num_threads()})")
    print(f"prompts: {len(prompts)}  max_new_tokens: {batched_settings.max_new_tokens}  "
          f"batch_size: {batched_settings.batch_size}", flush=True)

    backend.generate(prompts[:2], single_settings)       # warm-up
    t0 = time.perf_counter()
    single = [backend.generate([p], single_settings)[0] for p in prompts]
    single_s = time.perf_counter() - t0
    print(f"per-item: {single_s:8.2f} s", flush=True)
    t0 = time.perf_counter()
    batched = backend.generate(prompts, batched_settings)
    batched_s = time.perf_counter() - t0
    tokens = sum(backend.last_stats.get("new_tokens", []))
    print(f"batched:  {batched_s:8.2f} s  ({tokens} new tokens)")
    ratio = single_s / batched_s if batched_s else float("inf")
    same = sum(a == b for a, b in zip(single, batched))
    print(f"speed-up (per-item / batched): {ratio:.1f}x")
    print(f"identical outputs: {same}/{len(prompts)}")
    for i, (a, b) in enumerate(zip(single, batched)):
        if a != b:
            print(f"  differs at {records[i]['id']}:\n    per-item: {a!r}\n    batched:  {b!r}")
    backend.close()
    if args.json:
        Path(args.json).write_text(json.dumps({
            "model": str(model), "n_prompts": len(prompts), "settings": batched_settings.to_dict(),
            "per_item_s": round(single_s, 2), "batched_s": round(batched_s, 2),
            "ratio": round(ratio, 2), "identical": same, "new_tokens": tokens,
            "load_average": os.getloadavg()}, indent=2, sort_keys=True) + "\n")
    return 0 if same == len(prompts) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # a2c's user errors: one line, no traceback
        from a2c.errors import A2CError
        if not isinstance(exc, A2CError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
