"""A task's baseline before and after issue 31: generate() in batches of `batch_size`, every
sequence to its end, versus the greedy pool (runtime/inference/greedy_pool.py) with the grader's
answer rule (runtime/inference/answer_stop.py). Same model, same records, same grader, side by
side in one process.

    python benchmarks/bench_grader_stop.py                  # SmolLM2, arith + the authored task
    python benchmarks/bench_grader_stop.py --tasks authored-512
    python benchmarks/bench_grader_stop.py --model tiny     # quick
    python benchmarks/bench_grader_stop.py --json out.json

Tasks (100 held-out records each, the base model's baseline: `grade_model`, model load included):
- `arith`: the built-in task's grader as compiled (`#### N`, 32 new tokens, batch_size 100);
- `authored`: a string-answer task as `a2c new task` writes one and tests/check/task_authoring.py
  fills it (code words, `Answer:\\s*([A-Za-z]+)`, fallback none), inference left as the template
  has it: max_new_tokens 64, batch_size at its default (32);
- `authored-512`: the same with max_new_tokens left at the spec default (512), the issue's case.

Prints each baseline's seconds and new tokens before and after, the ratio, and whether every
item's extracted answer and the score are identical (they must be). Exits 1 when they differ.
The runs alternate (before, after) so a change of the machine's load hits both. "After" includes
the backend's thread choice (one intra-op thread on an overloaded CPU, transformers_engine.py
`_threads_now`); pass `--threads N` to pin both sides to N threads and see the pool and the answer
rule alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_parity import arith_task, resolve_model

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def code_word_records(n: int, skip: int = 400, seed: int = 7) -> list[dict]:
    """tests/check/task_authoring.py's held-out records: code words to write in capitals."""
    rng = random.Random(seed)
    words: list[str] = []
    while len(words) < skip + n:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))
        if word not in words:
            words.append(word)
    return [{"id": f"w{i}", "prompt": f"Write the code word {w} in capital letters.",
             "answer": w.upper()} for i, w in enumerate(words) if i >= skip]


def tasks(names: list[str], n: int) -> list[tuple[str, dict, list[dict]]]:
    from a2c.contracts.inference import DEFAULT_INFERENCE
    from a2c.contracts.spec import TaskSpec
    from a2c.runtime.data import load_split

    out = []
    for name in names:
        if name == "arith":
            task, root = arith_task()
            grader = task["grader"]
            grader = {**grader, "inference": {**DEFAULT_INFERENCE, **grader["inference"]}}
            out.append((name, grader, load_split(TaskSpec.from_dict(task), "heldout", root)[:n]))
        elif name in ("authored", "authored-512"):
            inference = {**DEFAULT_INFERENCE,
                         "prompt_template": "{prompt}\nReply with 'Answer: <WORD>'."}
            if name == "authored":
                inference["max_new_tokens"] = 64
            grader = {"kind": "exact_match", "inference": inference,
                      "params": {"pattern": r"Answer:\s*([A-Za-z]+)", "fallback": "none",
                                 "normalize": "none"}}
            out.append((name, grader, code_word_records(n)))
        else:
            raise SystemExit(f"unknown task {name!r} (arith, authored, authored-512)")
    return out


@contextlib.contextmanager
def before_issue31():
    """generate() in batches of batch_size, no answer rule, torch's thread count whatever the
    load: the grader as it was."""
    from a2c.runtime.graders.exact_match import ExactMatchGrader
    from a2c.runtime.inference.transformers_engine import TransformersEngine

    init, rule = TransformersEngine.__init__, ExactMatchGrader.answer_stop

    def old_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.use_pool = False
        self.load_threads = False

    TransformersEngine.__init__ = old_init
    ExactMatchGrader.answer_stop = lambda self: None
    try:
        yield
    finally:
        TransformersEngine.__init__, ExactMatchGrader.answer_stop = init, rule


def baseline(grader_cfg: dict, records: list[dict], model: Path) -> dict:
    from a2c.runtime.graders import get_grader
    from a2c.runtime.inference.transformers_engine import TransformersEngine

    stats: dict = {}
    generate = TransformersEngine.generate

    def spy(self, prompts, settings):
        out = generate(self, prompts, settings)
        stats.update(self.last_stats)
        return out

    TransformersEngine.generate = spy
    try:
        started = time.perf_counter()
        result = get_grader(grader_cfg).grade_model(model, records, "transformers")
        seconds = time.perf_counter() - started
    finally:
        TransformersEngine.generate = generate
    return {"seconds": round(seconds, 2), "score": result.score,
            "answers": [it["extracted"] for it in result.items],
            "new_tokens": sum(stats.get("new_tokens", [])),
            "longest": max(stats.get("new_tokens", [0])),
            "answer_stops": stats.get("answer_stops", 0), "threads": stats.get("threads"),
            "pool_rows": stats.get("pool_rows"), "batches": stats.get("batches")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="built-in name (tiny, smollm2-135m-instruct) or a model folder")
    parser.add_argument("--tasks", default="arith,authored",
                        help="comma-separated: arith, authored, authored-512")
    parser.add_argument("--n", type=int, default=100, help="held-out records per task")
    parser.add_argument("--threads", type=int, default=None,
                        help="intra-op threads for both sides (default: before torch's choice, "
                             "after the backend's)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.threads:
        os.environ["A2C_TORCH_THREADS"] = str(args.threads)

    model = resolve_model(args.model)
    print(f"model: {model}  load average: {os.getloadavg()[0]:.1f}", flush=True)
    figures, same_everywhere = {}, True
    chosen = tasks(args.tasks.split(","), args.n)
    with before_issue31():                      # warm-up: imports, first forwards
        baseline(chosen[0][1], chosen[0][2][:2], model)
    for name, grader_cfg, records in chosen:
        inf = grader_cfg["inference"]
        print(f"{name}: {len(records)} records, max_new_tokens {inf['max_new_tokens']}, "
              f"batch_size {inf['batch_size']}", flush=True)
        with before_issue31():
            before = baseline(grader_cfg, records, model)
        print(f"  before: {before['seconds']:8.1f} s  {before['new_tokens']:6d} new tokens "
              f"(longest {before['longest']}, {before['batches']} batches, "
              f"{before['threads']} threads)  "
              f"score {before['score']:.1f}", flush=True)
        after = baseline(grader_cfg, records, model)
        print(f"  after:  {after['seconds']:8.1f} s  {after['new_tokens']:6d} new tokens "
              f"(longest {after['longest']}, pool of {after['pool_rows']}, "
              f"{after['threads']} threads, "
              f"{after['answer_stops']} stopped by the answer rule)  score {after['score']:.1f}",
              flush=True)
        same = before["answers"] == after["answers"] and before["score"] == after["score"]
        same_everywhere &= same
        ratio = before["seconds"] / after["seconds"] if after["seconds"] else float("inf")
        print(f"  speed-up (before / after): {ratio:.2f}x   identical answers and score: "
              f"{'yes' if same else 'NO'}   load average: {os.getloadavg()[0]:.1f}", flush=True)
        if not same:
            for rec, a, b in zip(records, before["answers"], after["answers"]):
                if a != b:
                    print(f"    {rec['id']}: {a!r} -> {b!r}")
        figures[name] = {"before": {k: v for k, v in before.items() if k != "answers"},
                         "after": {k: v for k, v in after.items() if k != "answers"},
                         "ratio": round(ratio, 2), "identical": same}
    if args.json:
        Path(args.json).write_text(json.dumps({"model": str(model), "tasks": figures,
                                               "load_average": os.getloadavg()},
                                              indent=2, sort_keys=True) + "\n")
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # a2c's user errors: one line, no traceback
        from a2c.errors import A2CError
        if not isinstance(exc, A2CError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
