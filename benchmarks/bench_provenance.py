#!/usr/bin/env python
"""What the provenance check costs next to one evaluation.

    .venv/bin/python benchmarks/bench_provenance.py [--model smollm2|tiny|PATH] [--repeats 3]

Measures on this machine, for the arith task's base model (SmolLM2-135M-Instruct by default):
  - one real evaluation (child process: load, generate, grade) on the arith held-out set;
  - the provenance check (runtime/grader_service/provenance.py) of a fine-tuned-like copy of the
    model (1e-3 relative noise on one layer group) against the model: config and tokenizer
    compared, every tensor read through a memory map and compared;
and prints the check's time and its ratio to the evaluation. `--json FILE` also writes them.

    .venv/bin/python benchmarks/bench_provenance.py --calibrate [--json FILE]

calibrates the `not_derived` threshold (provenance.py `NOT_DERIVED_REL_CHANGE`): real short
fine-tunes of the model with the reference agents' own training code (agents/reference/sft.py
`train_sft`, grpo.py `train_grpo`: their defaults and more aggressive learning rates) on the arith
agent split, each saved with save_pretrained and checked; then the attacks (random
initialisation, the embedding matrix replaced, the embedding scaled, one layer replaced). Prints
each one's largest per-group relative change and the verdict.
"""

from __future__ import annotations

import argparse
import json
import os
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


# (name, route, learning rate, steps, batch): the reference agents' defaults (SFT lr 5e-5 in
# stages of 25 steps; rl-only GRPO lr 2e-5 in stages of 20) and ten times their learning rates.
# Adam's step per weight is about the learning rate whatever the batch, so small batches (a
# 2-core machine) move the weights as far per step as the agents' batches of 8.
FINE_TUNES = (("sft-ref", "sft", 5e-5, 25, 2), ("sft-lr5e-4", "sft", 5e-4, 15, 2),
              ("grpo-ref", "grpo", 2e-5, 5, 4), ("grpo-lr2e-4", "grpo", 2e-4, 5, 4),
              ("sft-lr2e-4-long", "sft", 2e-4, 60, 2),
              ("sft-then-grpo", "sft+grpo", 2e-4, 5, 4))
# "sft+grpo": the GRPO agent's free-mode route, a supervised warm-up (lr 5e-4, 15 steps, so that
# the model writes the answer format and GRPO's rewards vary) then GRPO from it.


def _agent_ctx(model: Path, work: Path):
    from a2c.agents.kit.context import AgentContext
    work.mkdir(parents=True, exist_ok=True)
    return AgentContext(workspace=work, output_dir=work / "output", data_dir=work,
                        base_model=model, mode="free", seed=0, deadline=time.time() + 1e6,
                        meta={})


def fine_tune(model: Path, out: Path, route: str, lr: float, steps: int, batch: int,
              records: list[dict]) -> Path:
    """A real fine-tune with the reference agents' code, saved as they save it."""
    from a2c.agents.kit import training
    from a2c.agents.reference import grpo, sft

    ctx = _agent_ctx(model, out.parent / f"{out.name}-work")
    net, tokenizer = training.load_model(model)
    if route == "sft":
        net, _, _ = sft.train_sft(ctx, net, tokenizer, records, steps, batch, lr, 0, out.name)
    else:
        if route == "sft+grpo":
            net, _, _ = sft.train_sft(ctx, net, tokenizer, records, 15, 2, 5e-4, 0,
                                      f"{out.name}-warm-up")
        os.environ["A2C_AGENT_PARAMS"] = json.dumps({"batch": batch})   # ref-grpo's own param
        net, _, _ = grpo.train_grpo(ctx, net, tokenizer, records, steps, out.name, lr=lr)
    return training.save_model(net, tokenizer, out)


def attacks(model: Path, tmp: Path) -> dict[str, Path]:
    """The red team's routes: a random initialisation, the embedding matrix replaced by random
    values of the same scale, the embedding scaled by 2, one layer replaced."""
    import torch
    from safetensors.torch import load_file, save_file

    def variant(name, change):
        out = tmp / name
        shutil.copytree(model, out)
        gen = torch.Generator().manual_seed(0)
        for path in sorted(out.glob("*.safetensors")):
            tensors = load_file(path)
            save_file({k: change(k, v, gen).contiguous() for k, v in tensors.items()}, path,
                      metadata={"format": "pt"})
        return out

    last = max(int(n.split(".layers.")[1].split(".")[0])
               for path in model.glob("*.safetensors") for n in load_file(path)
               if ".layers." in n)

    def rand_like(v, gen):
        return (v.float().std() * torch.randn(v.shape, generator=gen)).to(v.dtype)

    return {
        "random-init": variant("random-init", lambda k, v, g: rand_like(v, g) if v.dim() > 1
                               else v),
        "random-embedding": variant("random-embedding", lambda k, v, g: rand_like(v, g)
                                    if "embed" in k else v),
        "embedding-x2": variant("embedding-x2", lambda k, v, g: 2 * v if "embed" in k else v),
        "last-layer-replaced": variant("last-layer-replaced", lambda k, v, g: rand_like(v, g)
                                       if f".layers.{last}." in k and v.dim() > 1 else v),
    }


def calibrate(model: Path, out_json: str | None, only: set[str] | None = None) -> int:
    from a2c.runtime.grader_service.provenance import NOT_DERIVED_REL_CHANGE, check_provenance
    sys.path.insert(0, str(ROOT))
    from a2c.contracts.bundle import Bundle
    from a2c.runtime.data import load_split

    bundle_dir = ROOT / "generated" / "arith"
    records = load_split(Bundle.load(bundle_dir).task, "agent", bundle_dir)
    tmp = Path(tempfile.mkdtemp(prefix="a2c-calib-"))
    rows = []
    try:
        subjects = [] if only else [(name, "attack", lambda p=path: p)
                                    for name, path in attacks(model, tmp).items()]
        subjects += [(name, "fine-tune", lambda n=name, r=route, lr=lr, st=steps, b=batch:
                      fine_tune(model, tmp / n, r, lr, st, b, records))
                     for name, route, lr, steps, batch in FINE_TUNES
                     if not only or name in only]
        for name, kind, make in subjects:
            started = time.perf_counter()
            folder = make()
            made = time.perf_counter() - started
            prov = check_provenance(folder, model)
            w = prov["weights"]
            row = {"name": name, "kind": kind, "not_derived": prov["not_derived"],
                   "max_relative_change": w.get("max_relative_change"),
                   "max_group": w.get("max_group"),
                   "median_relative_change": w.get("median_relative_change"),
                   "relative_change": w.get("relative_change"), "made_s": round(made, 1)}
            rows.append(row)
            print(f"{name:22s} {kind:9s} max {row['max_relative_change']:.4g} "
                  f"({row['max_group']}) median {row['median_relative_change']:.4g} "
                  f"not_derived={row['not_derived']}  [{made:.0f} s]", flush=True)
            if kind == "fine-tune":
                shutil.rmtree(folder, ignore_errors=True)
            if out_json:   # as it goes: a long calibration leaves its rows if stopped
                Path(out_json).write_text(json.dumps({"rows": rows}, indent=2) + "\n")
        tunes = [r for r in rows if r["kind"] == "fine-tune"]
        figures = {"model": model.name, "threshold": NOT_DERIVED_REL_CHANGE,
                   "max_fine_tune_change": max((r["max_relative_change"] for r in tunes),
                                               default=None),
                   "false_positives": sum(bool(r["not_derived"]) for r in tunes),
                   "fine_tunes": len(tunes),
                   "attacks_flagged": sum(bool(r["not_derived"]) for r in rows
                                          if r["kind"] == "attack"),
                   "attacks": sum(r["kind"] == "attack" for r in rows), "rows": rows}
        print(f"largest fine-tune change {figures['max_fine_tune_change']:.4g}; false "
              f"positives {figures['false_positives']} of {len(tunes)}; attacks flagged "
              f"{figures['attacks_flagged']} of {figures['attacks']}")
        if out_json:
            Path(out_json).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--only", default=None, help="--calibrate: these fine-tunes only "
                        "(comma-separated names of FINE_TUNES), no attacks")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.calibrate:
        return calibrate(resolve_model(args.model or "smollm2"), args.json,
                         set(args.only.split(",")) if args.only else None)

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
                   "max_relative_change": prov["weights"].get("max_relative_change"),
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
