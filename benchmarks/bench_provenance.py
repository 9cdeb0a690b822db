#!/usr/bin/env python
"""What the provenance check costs next to one evaluation, and what its thresholds rest on.

    .venv/bin/python benchmarks/bench_provenance.py [--model smollm2|tiny|PATH] [--repeats 3]

Measures on this machine, for the arith task's base model (SmolLM2-135M-Instruct by default):
one real evaluation (child process: load, generate, grade) of a fine-tuned-like copy on the arith
held-out set, the intake gate (`check_submission_weights`: file resolution and every header) and
the provenance check (every tensor read and compared); prints their times and ratios.

    .venv/bin/python benchmarks/bench_provenance.py --train-routes DIR [--only ref-sft,...]

trains the reference agents' honest routes at their longest budgets with their own code
(agents/reference/sft.py `train_sft`, grpo.py `train_grpo`) on the arith agent split and saves
every stage as the agent submits it, DIR/<route>/stage-<k> (`ROUTES`).

    .venv/bin/python benchmarks/bench_provenance.py --calibrate [--routes DIR] [--json FILE]

runs the check on each saved route stage (honest: must be derived), on the attacks (random
initialisation, a random embedding matrix, the embedding doubled, the last layer replaced) and
on blends of the base with foreign weights saved as files (must be not derived above the
documented level); prints each one's largest group change, largest matrix change and largest
shrink, and the verdict.

    .venv/bin/python benchmarks/bench_provenance.py --blends [--json FILE]

the blend sweep: w = (1 − a)·base + a·foreign for a in 0.01..0.5, for three foreign models (a
random initialisation of the architecture, transformers' own `from_config`; random values at
the base's scale; the base with its hidden units, MLP units and attention heads permuted, a
trained model that computes the same function with other weights), naive and rescaled (each
tensor scaled back so that its projection on the base is the base: the shrink undone). Every
statistic is computed in closed form from ‖b‖², ‖f‖² and ⟨f, b⟩ per tensor (the check's sums,
exact for a blend), then the blends' loss on the arith agent split (teacher-forced answer tokens)
and greedy accuracy on a few held-out items: what such a model would score.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from bench_grader_overhead import arith_setup, resolve_model  # noqa: E402

BLEND_AS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
# (route, what the agent does at its longest budget): the spec defaults (specs/agents/*.yaml)
# and the arith budget's 10 submissions. ref-grpo's GRPO stages are run for GRPO_STAGES (a
# loaded 2-core machine) and its longest budget (9 stages of 20 steps) extrapolated linearly.
ROUTES = {
    "ref-sft": "2 stages x 25 SFT steps, batch 8, lr 5e-5 (ref-sft's most: stages x steps)",
    "ref-grpo": "SFT warm-up 25 steps b8 lr 5e-5, then GRPO stages of 20 steps, lr 5e-6, "
                "batch 8, 4 generations, one AdamW (weight decay 0.01) across stages",
    "sft-10x": "stress: ref-sft's first stage at 10x its learning rate (5e-4), 25 steps",
}


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


# ------------------------------------------------------------------ honest routes
def _arith_records():
    from a2c.contracts.bundle import Bundle
    from a2c.runtime.data import load_split

    bundle_dir = ROOT / "generated" / "arith"
    records = load_split(Bundle.load(bundle_dir).task, "agent", bundle_dir)
    random.Random(0).shuffle(records)
    meta = json.loads((bundle_dir / "workspace" / "run_meta.json").read_text())
    return records, meta


def _agent_ctx(model: Path, work: Path, meta: dict):
    from a2c.agents.kit.context import AgentContext
    work.mkdir(parents=True, exist_ok=True)
    return AgentContext(workspace=work, output_dir=work / "output", data_dir=work,
                        base_model=model, mode="free", seed=0, deadline=time.time() + 1e6,
                        meta=meta)


def train_routes(model: Path, out: Path, only: set[str] | None, grpo_stages: int) -> None:
    """Each route with the reference agents' own code; every stage saved as they save it."""
    import torch

    from a2c.agents.kit import training
    from a2c.agents.reference import grpo, sft

    records, meta = _arith_records()

    def save(net, tok, route, k):
        training.save_model(net, tok, out / route / f"stage-{k}")
        print(f"{route} stage {k} saved", flush=True)

    for route in ROUTES:
        if only and route not in only:
            continue
        ctx = _agent_ctx(model, out / f"{route}-work", meta)
        net, tok = training.load_model(model)
        started = time.time()
        if route in ("ref-sft", "sft-10x"):
            lr = 5e-5 if route == "ref-sft" else 5e-4
            for k in ((1, 2) if route == "ref-sft" else (1,)):   # a trainer a stage
                # the agent's records: 2 x steps x batch x stages
                net, _, _ = sft.train_sft(ctx, net, tok, records[:800], 25, 8, lr, k, f"s{k}")
                save(net, tok, route, k)
        else:
            os.environ["A2C_AGENT_PARAMS"] = json.dumps({"batch": 8})
            warm = out / "ref-sft" / "stage-1"     # the warm-up is ref-sft's first stage
            if (warm / "config.json").is_file():
                net, tok = training.load_model(warm)
            else:
                net, _, _ = sft.train_sft(ctx, net, tok, records[:400], 25, 8, 5e-5, 1, "warm")
                save(net, tok, route, 0)
            optimizer = torch.optim.AdamW(net.parameters(), lr=5e-6)
            for k in range(1, grpo_stages + 1):
                net, ran, rewards = grpo.train_grpo(ctx, net, tok, records, 20, f"grpo-{k}",
                                                    optimizer=optimizer, seed=k, lr=5e-6)
                print(f"{route} stage {k}: {ran} steps, rewards "
                      f"{[round(r, 3) for r in rewards]}", flush=True)
                save(net, tok, route, k)
        print(f"{route} done in {time.time() - started:.0f} s", flush=True)


# ------------------------------------------------------------------ foreign weights, blends
def _state(model: Path) -> dict:
    from safetensors.torch import load_file
    tensors = {}
    for path in sorted(model.glob("*.safetensors")):
        tensors.update(load_file(path))
    return tensors


def permuted(base: dict, config: dict, seed: int = 0) -> dict:
    """The base with its residual dimensions, MLP units and attention heads (query heads within
    their key/value group, the groups themselves) permuted: a trained model of the same
    architecture computing the same function, with other weights (Llama layout)."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    hd = config.get("head_dim") or hidden // heads
    per = heads // kv
    ph = torch.randperm(hidden, generator=gen)
    out = {}
    for name, t in base.items():
        t = t.clone()
        if t.dim() == 1:
            out[name] = t[ph]
            continue
        if "embed_tokens" in name or "lm_head" in name:
            out[name] = t[:, ph]
            continue
        if any(k in name for k in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")):
            t = t[:, ph]
        if any(k in name for k in ("o_proj", "down_proj")):
            t = t[ph, :]
        out[name] = t
    layers = {n.split(".layers.")[1].split(".")[0] for n in base if ".layers." in n}
    for i in sorted(layers):
        pre = f"model.layers.{i}."
        pi = torch.randperm(inter, generator=gen)
        for n in ("mlp.gate_proj.weight", "mlp.up_proj.weight"):
            out[pre + n] = out[pre + n][pi, :]
        out[pre + "mlp.down_proj.weight"] = out[pre + "mlp.down_proj.weight"][:, pi]
        groups = torch.randperm(kv, generator=gen)
        qorder = torch.cat([g * per + torch.randperm(per, generator=gen) for g in groups])

        def rows(t, order):
            return t.view(len(order), hd, -1)[order].reshape(t.shape)
        out[pre + "self_attn.q_proj.weight"] = rows(out[pre + "self_attn.q_proj.weight"], qorder)
        for n in ("self_attn.k_proj.weight", "self_attn.v_proj.weight"):
            out[pre + n] = rows(out[pre + n], groups)
        o = out[pre + "self_attn.o_proj.weight"]
        out[pre + "self_attn.o_proj.weight"] = (o.view(o.shape[0], heads, hd)[:, qorder]
                                                .reshape(o.shape))
    return {k: v.contiguous() for k, v in out.items()}


def foreigns(model: Path) -> dict[str, dict]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    base = _state(model)
    torch.manual_seed(0)
    init = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model))
    init_state = {k: v.detach().clone() for k, v in init.state_dict().items() if k in base}
    gen = torch.Generator().manual_seed(0)
    same = {k: (v.float().std() * torch.randn(v.shape, generator=gen)).to(v.dtype)
            if v.dim() > 1 else v for k, v in base.items()}
    config = json.loads((model / "config.json").read_text())
    return {"random-init": init_state, "random-same-scale": same,
            "permuted-base": permuted(base, config)}


def blend(base: dict, foreign: dict, a: float, rescale: bool) -> dict:
    out = {}
    for k, b in base.items():
        w = (1 - a) * b.float() + a * foreign[k].float()
        if rescale and bool(b.any()):
            w = w * (b.double().pow(2).sum() / (w.double() * b.double()).sum()).float()
        out[k] = w.to(b.dtype).contiguous()
    return out


def blend_sweep(model: Path) -> list[dict]:
    """Closed form: per tensor ‖b‖², ‖f‖², ⟨f, b⟩, then every blend's statistics."""
    from a2c.runtime.grader_service.provenance import layer_group
    base = _state(model)
    rows = []
    for fname, foreign in foreigns(model).items():
        sums = {}
        for k, b in base.items():
            bd, fd = b.double(), foreign[k].double()
            sums[k] = (float((bd * bd).sum()), float((fd * fd).sum()), float((fd * bd).sum()),
                       b.dim() > 1)
        for a in BLEND_AS:
            for rescale in (False, True):
                groups: dict[str, list[float]] = {}
                top_matrix = 0.0
                for k, (bb, ff, fb, matrix) in sums.items():
                    ww = (1 - a) ** 2 * bb + 2 * a * (1 - a) * fb + a * a * ff
                    wb = (1 - a) * bb + a * fb
                    if rescale and bb > 0:
                        s = bb / wb
                        ww, wb = s * s * ww, bb
                    diff = max(0.0, ww - 2 * wb + bb)
                    acc = groups.setdefault(layer_group(k), [0.0, 0.0, 0.0])
                    acc[0] += diff
                    acc[1] += bb
                    acc[2] += wb
                    if matrix:
                        top_matrix = max(top_matrix, math.sqrt(diff / bb))
                rel = {g: math.sqrt(d / r) for g, (d, r, _) in groups.items()}
                shrink = {g: 1 - p / r for g, (_, r, p) in groups.items()}
                rows.append({"foreign": fname, "a": a, "rescaled": rescale,
                             "max_group_change": round(max(rel.values()), 4),
                             "min_group_change": round(min(rel.values()), 4),
                             "max_matrix_change": round(top_matrix, 4),
                             "max_abs_shrink": round(max(abs(v) for v in shrink.values()), 4)})
    return rows


def blend_function(model: Path, tuned: Path | None = None, n_loss: int = 32,
                   n_greedy: int = 16) -> list[dict]:
    """What blends would score: the answer tokens' loss on agent-split records (teacher forced)
    and greedy exact match on held-out items, for the base, a fine-tune of it (`tuned`, e.g. the
    reference SFT agent's last stage) and blends of the base with that fine-tune permuted (a
    better model of another lineage as far as its weights tell: same function, other weights)
    and with a random initialisation."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from a2c.agents.kit import answers
    from a2c.agents.kit.answers import AnswerFormat

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    records, meta = _arith_records()
    _, heldout, _ = arith_setup()
    fmt = AnswerFormat.from_task(meta["task"])
    tok = AutoTokenizer.from_pretrained(model)
    net = AutoModelForCausalLM.from_pretrained(model).eval()
    stored = set(_state(model))        # a tied head is not stored: loading the embedding sets it
    base = {k: v.clone() for k, v in net.state_dict().items() if k in stored}
    config = json.loads((model / "config.json").read_text())
    foreign = {"random-init": foreigns(model)["random-init"]}
    if tuned is not None:
        tuned_state = {k: v for k, v in _state(tuned).items() if k in base}
        foreign["tuned"] = tuned_state
        foreign["permuted-tuned"] = permuted(tuned_state, config)

    def prompt_ids(text):
        chat = tok.apply_chat_template([{"role": "user", "content": text}],
                                       add_generation_prompt=True, tokenize=False)
        return tok(chat, add_special_tokens=False)["input_ids"]

    loss_items = [(prompt_ids(r["prompt"]), tok(answers.completion_for(r, fmt),
                                                add_special_tokens=False)["input_ids"])
                  for r in records[-n_loss:]]       # records the routes trained on least

    def measure():
        total, count = 0.0, 0
        with torch.inference_mode():
            for p, c in loss_items:
                ids = torch.tensor([p + c])
                logits = net(ids).logits[0, len(p) - 1:-1]
                total += float(torch.nn.functional.cross_entropy(logits, torch.tensor(c),
                                                                 reduction="sum"))
                count += len(c)
            right = 0
            for r in heldout[:n_greedy]:
                ids = torch.tensor([prompt_ids(r["prompt"])])
                out = net.generate(ids, max_new_tokens=24, do_sample=False,
                                   pad_token_id=tok.eos_token_id)
                text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
                right += bool(fmt.correct(text, str(r.get("answer"))))
        return round(total / count, 4), right / n_greedy

    subjects = [("base", 0.0, False)]
    if tuned is not None:
        subjects += [("tuned", 1.0, False)]
        subjects += [("permuted-tuned", a, rs) for a, rs in
                     ((0.05, False), (0.05, True), (0.1, True), (0.2, True), (0.3, False),
                      (0.5, False), (1.0, False))]
    subjects += [("random-init", 0.1, False), ("random-init", 0.1, True)]
    rows = []
    for fname, a, rescale in subjects:
        state = base if fname == "base" else blend(base, {**base, **foreign[fname]}, a, rescale)
        net.load_state_dict(state, strict=False)
        loss, acc = measure()
        rows.append({"foreign": fname, "a": a, "rescaled": rescale, "answer_loss": loss,
                     "greedy_accuracy": acc})
        print(f"{fname:14s} a={a:<4} {'rescaled' if rescale else 'naive   '} answer loss "
              f"{loss:.3f}  greedy accuracy {acc:.2f} (of {n_greedy})", flush=True)
    return rows


# ------------------------------------------------------------------ the check on files
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


def saved_blends(model: Path, tmp: Path):
    """Blends written as submissions (the check reads the files), one at a time."""
    from safetensors.torch import save_file
    base = _state(model)
    foreign = foreigns(model)
    for fname in ("random-init", "random-same-scale", "permuted-base"):
        for a, rescale in ((0.05, False), (0.1, False), (0.3, False), (0.1, True),
                           (0.3, True)):
            name = f"blend-{fname}-{a}{'-rescaled' if rescale else ''}"
            out = tmp / name
            shutil.copytree(model, out)
            save_file(blend(base, foreign[fname], a, rescale), out / "model.safetensors",
                      metadata={"format": "pt"})
            yield name, out
            shutil.rmtree(out, ignore_errors=True)


def _row(name: str, kind: str, prov: Any) -> dict:
    w = prov.weights
    row = {"name": name, "kind": kind, "not_derived": prov.not_derived,
           "max_relative_change": w.get("max_relative_change"), "max_group": w.get("max_group"),
           "max_tensor_change": w.get("max_tensor_change"), "max_tensor": w.get("max_tensor"),
           "max_shrink": w.get("max_shrink"), "max_shrink_group": w.get("max_shrink_group"),
           "model_relative_change": w.get("model_relative_change"),
           "model_shrink": w.get("model_shrink"),
           "median_relative_change": w.get("median_relative_change"),
           "check_s": prov.elapsed_s}
    print(f"{name:34s} {kind:9s} group {row['max_relative_change']:.4g} ({row['max_group']}) "
          f"matrix {row['max_tensor_change']:.4g} shrink {row['max_shrink']:+.2g} "
          f"({row['max_shrink_group']}) not_derived={row['not_derived']} "
          f"[{prov['elapsed_s']:.0f} s]", flush=True)
    return row


def calibrate(model: Path, routes: Path | None, out_json: str | None,
              only: set[str] | None) -> int:
    from a2c.runtime.grader_service.provenance import (
        NOT_DERIVED_REL_CHANGE,
        NOT_DERIVED_SHRINK,
        check_provenance,
    )
    tmp = Path(tempfile.mkdtemp(prefix="a2c-calib-"))
    rows: list[dict] = []

    def keep(row):
        rows.append(row)
        if out_json:   # as it goes: a long calibration leaves its rows if stopped
            Path(out_json).write_text(json.dumps({"rows": rows}, indent=2) + "\n")

    try:
        if routes is not None:
            for folder in sorted(p for p in routes.glob("*/stage-*") if p.is_dir()):
                if not only or folder.parent.name in only:
                    keep(_row(f"{folder.parent.name}/{folder.name}", "honest",
                              check_provenance(folder, model)))
        if not only or "attacks" in only:
            for name, folder in attacks(model, tmp).items():
                keep(_row(name, "attack", check_provenance(folder, model)))
                shutil.rmtree(folder, ignore_errors=True)
        if not only or "blends" in only:
            for name, folder in saved_blends(model, tmp):
                keep(_row(name, "blend", check_provenance(folder, model)))
        honest = [r for r in rows if r["kind"] == "honest"]
        figures = {"model": model.name, "threshold": NOT_DERIVED_REL_CHANGE,
                   "shrink_threshold": NOT_DERIVED_SHRINK,
                   "max_honest_group_change": max((r["max_relative_change"] for r in honest),
                                                  default=None),
                   "max_honest_matrix_change": max((r["max_tensor_change"] for r in honest),
                                                   default=None),
                   "max_honest_abs_shrink": max((abs(r["max_shrink"]) for r in honest),
                                                default=None),
                   "false_positives": sum(bool(r["not_derived"]) for r in honest),
                   "honest": len(honest), "rows": rows}
        print(f"honest: largest group change {figures['max_honest_group_change']}, matrix "
              f"{figures['max_honest_matrix_change']}, |shrink| "
              f"{figures['max_honest_abs_shrink']}; flagged {figures['false_positives']} of "
              f"{len(honest)}")
        if out_json:
            Path(out_json).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def cost(model_name: str | None, repeats: int, out_json: str | None) -> int:
    from a2c.runtime.grader_service.evaluator import run_evaluation
    from a2c.runtime.grader_service.provenance import check_provenance
    from a2c.runtime.grader_service.weight_files import check_submission_weights

    grader, records, default_model = arith_setup()
    model = resolve_model(model_name or default_model)
    tmp = Path(tempfile.mkdtemp(prefix="a2c-bench-prov-"))
    try:
        sub = nudged_copy(model, tmp / "submission")
        heldout = tmp / "heldout.jsonl"
        heldout.write_text("".join(json.dumps(r) + "\n" for r in records))
        cfg = tmp / "grader.json"
        cfg.write_text(json.dumps(grader))
        outcome = run_evaluation([sys.executable, "-m", "a2c.runtime.grader_service.evaluate_one"],
                                 grader_cfg_path=cfg, model=sub, heldout=heldout, engine="auto",
                                 out_path=tmp / "eval.json", timeout_s=1800,
                                 log_path=tmp / "eval.log")
        if not outcome.valid:
            print(f"evaluation failed: {outcome.message}", file=sys.stderr)
            return 1
        gate, times, prov = [], [], None
        for _ in range(repeats):
            started = time.perf_counter()
            check_submission_weights(sub)
            gate.append(time.perf_counter() - started)
            started = time.perf_counter()
            prov = check_provenance(sub, model)
            times.append(time.perf_counter() - started)
        check, gate_s = statistics.median(times), statistics.median(gate)
        figures = {"evaluation_s": round(outcome.elapsed_s, 3), "provenance_s": round(check, 3),
                   "intake_gate_s": round(gate_s, 4),
                   "ratio": round(check / outcome.elapsed_s, 4),
                   "not_derived": prov.not_derived,
                   "max_relative_change": prov.weights.get("max_relative_change"),
                   "changed_fraction": prov.weights.get("changed_fraction"),
                   "items": len(records), "cpus": os.cpu_count(),
                   "load_average": round(os.getloadavg()[0], 2)}
        print(f"model {model.name}: one evaluation ({len(records)} items) "
              f"{outcome.elapsed_s:.2f} s; provenance check {check:.3f} s (median of {repeats}) "
              f"= {100 * check / outcome.elapsed_s:.1f}% of the evaluation; intake gate "
              f"{1000 * gate_s:.1f} ms; not_derived={prov['not_derived']} (load average "
              f"{figures['load_average']} on {figures['cpus']} CPUs)")
        if out_json:
            Path(out_json).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--routes", default=None, help="--calibrate: the saved honest routes "
                        "(--train-routes DIR)")
    parser.add_argument("--train-routes", default=None, metavar="DIR")
    parser.add_argument("--grpo-stages", type=int, default=2)
    parser.add_argument("--blends", action="store_true")
    parser.add_argument("--no-function", action="store_true",
                        help="--blends: the statistics only, not the blends' loss and accuracy")
    parser.add_argument("--tuned", default=None, help="--blends: a fine-tune of the model (its "
                        "permuted copy is the capable foreign model blended in)")
    parser.add_argument("--only", default=None, help="routes (names of ROUTES), 'attacks', "
                        "'blends' (comma-separated)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    model = resolve_model(args.model or "smollm2")
    if args.train_routes:
        train_routes(model, Path(args.train_routes), only, args.grpo_stages)
        return 0
    if args.calibrate:
        return calibrate(model, Path(args.routes) if args.routes else None, args.json, only)
    if args.blends:
        rows = [] if args.only == "function" else blend_sweep(model)
        for r in rows:
            print(f"{r['foreign']:18s} a={r['a']:<5} {'rescaled' if r['rescaled'] else 'naive   '}"
                  f" group change {r['min_group_change']:.4f}..{r['max_group_change']:.4f}  "
                  f"matrix {r['max_matrix_change']:.4f}  |shrink| {r['max_abs_shrink']:.4f}")
        function = [] if args.no_function else blend_function(
            model, Path(args.tuned) if args.tuned else None)
        if args.json:
            Path(args.json).write_text(json.dumps({"sweep": rows, "function": function},
                                                  indent=2) + "\n")
        return 0
    return cost(args.model, args.repeats, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
