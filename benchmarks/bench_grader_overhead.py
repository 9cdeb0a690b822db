#!/usr/bin/env python
"""What the grader service costs on top of the model inference it surrounds.

    .venv/bin/python benchmarks/bench_grader_overhead.py [--model smollm2|tiny|PATH] [--repeats 5]

Measures, in one run on this machine:
  - inference: one real evaluation (child process: load the model, generate, grade) of the model on
    the arith task's held-out set (100 two-digit additions, the exact_match grader of the bundle);
  - overhead per submission excluding inference: submit -> acknowledged (path check, weights
    hash, journal append + fsync, event, snapshot) and scored -> recorded (results file, journal,
    event), with a no-op evaluator so no inference is included, and each part on its own;
  - a cache hit: a submission of weights already scored (hash + journal, no evaluation);
  - a snapshot of a 1,000-file workspace (first commit, after 10 files changed, unchanged).
Each is printed as a time and as a ratio to the inference time. `--json FILE` also writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOOP_EVALUATOR = r'''
import argparse, json, os
from pathlib import Path
p = argparse.ArgumentParser()
for n in ("--grader", "--model", "--heldout", "--engine", "--out", "--parent-pid"):
    p.add_argument(n)
a = p.parse_args()
Path(a.out).write_text(json.dumps({"score": 50.0, "ci95": [40.0, 60.0], "n_items": 100,
    "items": [], "metrics": {}, "grader": "noop", "grader_version": "0", "backend": "none",
    "elapsed_s": 0.0, "valid": True, "error": None}))
'''


def arith_setup() -> tuple[dict, list[dict], str]:
    """The arith task's grader config and held-out records (from the compiled bundle)."""
    from a2c.contracts.bundle import Bundle
    from a2c.runtime.data import load_split

    bundle_dir = ROOT / "generated" / "arith"
    task = Bundle.load(bundle_dir).task
    grader = json.loads((bundle_dir / "grader" / "grader.json").read_text())
    records = load_split(task, "heldout", bundle_dir)
    return grader, records, task.base_model.builtin or "tiny"


def resolve_model(name: str) -> Path:
    if Path(name).is_dir():
        return Path(name)
    from a2c.runtime.models import prepare_builtin

    return prepare_builtin({"smollm2": "smollm2-135m-instruct"}.get(name, name))


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def make_workspace(ws: Path, n_files: int) -> None:
    for i in range(n_files):
        d = ws / f"pkg{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"# module {i}\n" + f"def f(x):\n    return x + {i}\n" * 20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="smollm2 | tiny | a model folder "
                        "(default: the arith task's base model)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()

    from a2c.canonical import sha256_tree
    from a2c.contracts.events import EventLog
    from a2c.contracts.journal import Journal
    from a2c.runtime.grader_service import start_grader_service as start_service
    from a2c.runtime.grader_service import write_service_config
    from a2c.runtime.grader_service.evaluator import run_evaluation
    from a2c.runtime.snapshots import Snapshotter

    grader, records, default_model = arith_setup()
    model = resolve_model(args.model or default_model)
    tmp = Path(tempfile.mkdtemp(prefix="a2c-bench-"))
    figures: dict[str, float] = {}
    try:
        run = tmp / "run"
        ws = run / "workspace"
        (ws / "output").mkdir(parents=True)
        (run / "grader").mkdir(parents=True)
        heldout = run / "grader" / "heldout.jsonl"
        heldout.write_text("".join(json.dumps(r) + "\n" for r in records))
        (run / "grader" / "grader.json").write_text(json.dumps(grader))
        make_workspace(ws, 20)
        sub_model = ws / "output" / "ckpt"
        shutil.copytree(model, sub_model)
        model_mb = sum(p.stat().st_size for p in sub_model.rglob("*") if p.is_file()) / 1e6

        # ---------------------------------------------------------------- inference
        print(f"model: {model} ({model_mb:.0f} MB); held-out: {len(records)} arith items; "
              f"grader: {grader['kind']}", flush=True)
        outcome = run_evaluation([sys.executable, "-m", "a2c.runtime.grader_service.evaluate_one"],
                                 grader_cfg_path=run / "grader" / "grader.json", model=sub_model,
                                 heldout=heldout, engine="auto",
                                 out_path=tmp / "inference.json", timeout_s=1800,
                                 log_path=tmp / "inference.log")
        if not outcome.valid:
            print(f"inference failed: {outcome.message}", file=sys.stderr)
            return 1
        inference = outcome.elapsed_s
        figures["inference_s"] = inference
        figures["inference_grader_elapsed_s"] = float(outcome.result.get("elapsed_s", 0.0))
        figures["inference_score"] = float(outcome.result["score"])

        # ---------------------------------------------------------------- parts, in process
        journal = Journal(tmp / "journal.jsonl")
        entry = {"op": "received", "id": 1, "ts": "x", "model_path": "/workspace/output/ckpt",
                 "weights_hash": "0" * 64, "note": ""}
        figures["journal_append_fsync_s"] = timed(lambda: journal.append(entry), 50)
        events = EventLog(tmp / "events.jsonl")
        figures["event_append_s"] = timed(lambda: events.append("submission_received", entry), 50)
        figures["weights_hash_s"] = timed(lambda: sha256_tree(sub_model), args.repeats)
        snap = Snapshotter(tmp / "s.git", ws)
        snap.snapshot("periodic")
        figures["snapshot_small_unchanged_s"] = timed(lambda: snap.snapshot("periodic"),
                                                      args.repeats)

        # ---------------------------------------------------------------- through the service
        noop = tmp / "noop_evaluator.py"
        noop.write_text(NOOP_EVALUATOR)
        token = secrets.token_hex(16)
        write_service_config(run, token=token, socket_path=str(run / "grader" / "grader.sock"),
                             host="127.0.0.1", port=0, deadline_unix=time.time() + 3600,
                             max_submissions=1000, min_interval_s=0, eval_timeout_s=600,
                             output_dir=str(ws / "output"), agent_output_dir="/workspace/output",
                             workspace=str(ws), heldout=str(heldout), engine="auto",
                             baseline_cache=str(tmp / "cache"), task_id="arith",
                             evaluator=[sys.executable, str(noop)])
        handle = start_service(run)
        try:
            client = handle.client(handle.unix_url)
            acks, totals, hits = [], [], []
            for i in range(args.repeats):
                # A distinct model each time (one changed byte in a small file): no cache hit.
                (sub_model / "a2c_bench_nonce.txt").write_text(str(i))
                (ws / "train.py").write_text(f"# edit {i}\n")
                t0 = time.perf_counter()
                sid = client.submit("output/ckpt")["id"]
                t1 = time.perf_counter()
                while client.status(sid)["status"] not in ("scored", "invalid"):
                    time.sleep(0.002)
                t2 = time.perf_counter()
                acks.append(t1 - t0)
                totals.append(t2 - t0)
                # The same weights again: a cache hit (hash, journal, reuse of the result).
                t0 = time.perf_counter()
                sid = client.submit("output/ckpt")["id"]
                while (s := client.status(sid))["status"] not in ("scored", "invalid"):
                    time.sleep(0.002)
                hits.append(time.perf_counter() - t0)
                assert s["duplicate_of"] is not None
            figures["submit_ack_s"] = statistics.median(acks)
            figures["overhead_per_submission_s"] = statistics.median(totals)
            figures["cache_hit_s"] = statistics.median(hits)
        finally:
            handle.stop(30)
        # The evaluator child on its own (process start, result written and read back).
        figures["noop_eval_child_s"] = timed(lambda: run_evaluation(
            [sys.executable, str(noop)], grader_cfg_path=run / "grader" / "grader.json",
            model=sub_model, heldout=heldout, engine="auto", out_path=tmp / "noop.json",
            timeout_s=60, log_path=tmp / "noop.log"), args.repeats)

        def record():
            (tmp / "results").mkdir(exist_ok=True)
            with open(tmp / "results" / "1.json", "wb") as fh:
                fh.write(json.dumps(outcome.result).encode())
                fh.flush()
                os.fsync(fh.fileno())
            journal.append({**entry, "op": "scored"})
            events.append("submission_scored", {"id": 1, "score": 1.0})

        figures["record_result_s"] = timed(record, args.repeats)

        # ---------------------------------------------------------------- 1,000-file workspace
        big = tmp / "ws1000"
        make_workspace(big, 1000)
        (big / "output" / "ckpt").mkdir(parents=True)
        (big / "output" / "ckpt" / "model.safetensors").write_bytes(b"\0" * 2_000_000)
        snap = Snapshotter(tmp / "s1000.git", big)
        t = time.perf_counter()
        info = snap.snapshot("periodic")
        figures["snapshot_1000_first_s"] = time.perf_counter() - t
        assert info["files"] == 1000, info

        def change10():
            for i in range(0, 1000, 100):
                p = big / f"pkg{i // 100}" / f"mod{i}.py"
                p.write_text(p.read_text() + f"# {time.perf_counter()}\n")
            return snap.snapshot("periodic")

        figures["snapshot_1000_10changed_s"] = timed(change10, args.repeats)
        figures["snapshot_1000_unchanged_s"] = timed(lambda: snap.snapshot("periodic"),
                                                     args.repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    inference = figures["inference_s"]
    rows = [
        ("inference (child: load + generate + grade, 100 items)", "inference_s"),
        ("overhead per submission, excluding inference (no-op evaluator, submit -> scored)",
         "overhead_per_submission_s"),
        ("  of which submit -> acknowledged (hash, journal, event, snapshot)", "submit_ack_s"),
        ("  part: evaluator child start, no inference (no-op child)", "noop_eval_child_s"),
        ("  part: record a result (results/<n>.json + journal + event, fsync)", "record_result_s"),
        ("  part: journal append + fsync", "journal_append_fsync_s"),
        ("  part: event append (hash chain, fsync)", "event_append_s"),
        ("  part: weights hash (sha256_tree)", "weights_hash_s"),
        ("  part: snapshot of the small workspace, unchanged", "snapshot_small_unchanged_s"),
        ("cache hit (identical weights: hash + journal, result reused)", "cache_hit_s"),
        ("snapshot of a 1,000-file workspace, first", "snapshot_1000_first_s"),
        ("snapshot of a 1,000-file workspace, 10 files changed", "snapshot_1000_10changed_s"),
        ("snapshot of a 1,000-file workspace, unchanged", "snapshot_1000_unchanged_s"),
    ]
    print(f"\nmodel {model.name} ({model_mb:.0f} MB), {len(records)} held-out items, "
          f"score {figures['inference_score']:.1f}, median of {args.repeats}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'':<86}{'time':>10}  {'vs inference':>12}")
    for label, key in rows:
        value = figures[key]
        print(f"{label:<86}{value * 1000:>8.1f}ms  {value / inference:>11.2%}")
    if args.json:
        Path(args.json).write_text(json.dumps({**figures, "model": str(model),
                                               "model_mb": model_mb}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
