#!/usr/bin/env python
"""What the provenance check costs next to one evaluation.

    .venv/bin/python benchmarks/bench_provenance.py [--model smollm2|tiny|PATH] [--repeats 3]

Measures on this machine, for the arith task's base model (SmolLM2-135M-Instruct by default):
  - one real evaluation (child process: load, generate, grade) on the arith held-out set;
  - the provenance check (runtime/grader_service/provenance.py) of a fine-tuned-like copy of the
    model (1e-3 relative noise on one layer group) against the model: config and tokenizer
    compared, every tensor read through a memory map and compared;
and prints the check's time and its ratio to the evaluation. `--json FILE` also writes them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_grader_overhead import arith_setup, resolve_model  # noqa: E402


def nudged_copy(model: Path, out: Path) -> Path:
    """The model with small moves on one layer group: what a short fine-tune leaves."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(model, out)
    for path in sorted(out.glob("*.safetensors")):
        tensors = load_file(path)
        gen = torch.Generator().manual_seed(0)
        save_file({k: (v + 1e-3 * v.abs().mean() * torch.randn(v.shape, generator=gen,
                                                              dtype=v.dtype))
                   if "layers.0." in k and v.dtype.is_floating_point else v
                   for k, v in tensors.items()}, path, metadata={"format": "pt"})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from a2c.runtime.grader_service.evaluator import run_evaluation
    from a2c.runtime.grader_service.provenance import check_provenance

    grader, records, default_model = arith_setup()
    model = resolve_model(args.model or default_model)
    tmp = Path(tempfile.mkdtemp(prefix="a2c-bench-prov-"))
    try:
        sub = nudged_copy(model, tmp / "submission")
        heldout = tmp / "heldout.jsonl"
        heldout.write_text("".join(json.dumps(r) + "\n" for r in records))
        cfg = tmp / "grader.json"
        cfg.write_text(json.dumps(grader))
        outcome = run_evaluation([sys.executable, "-m", "a2c.runtime.grader_service.evaluate_one"],
                                 grader_cfg_path=cfg, model=sub, heldout=heldout, backend="auto",
                                 out_path=tmp / "eval.json", timeout_s=1800,
                                 log_path=tmp / "eval.log")
        if not outcome.valid:
            print(f"evaluation failed: {outcome.message}", file=sys.stderr)
            return 1
        times, prov = [], None
        for _ in range(args.repeats):
            started = time.perf_counter()
            prov = check_provenance(sub, model)
            times.append(time.perf_counter() - started)
        check = statistics.median(times)
        figures = {"evaluation_s": round(outcome.elapsed_s, 3), "provenance_s": round(check, 3),
                   "ratio": round(check / outcome.elapsed_s, 4),
                   "not_derived": prov["not_derived"],
                   "median_relative_change": prov["weights"].get("median_relative_change"),
                   "changed_fraction": prov["weights"].get("changed_fraction"),
                   "items": len(records)}
        print(f"model {model.name}: one evaluation ({len(records)} items) "
              f"{outcome.elapsed_s:.2f} s; provenance check {check:.3f} s "
              f"(median of {args.repeats}) = {100 * check / outcome.elapsed_s:.1f}% of the "
              f"evaluation; not_derived={prov['not_derived']}, changed fraction "
              f"{figures['changed_fraction']}")
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
