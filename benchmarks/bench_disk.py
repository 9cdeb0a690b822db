#!/usr/bin/env python
"""The disk one trial takes for its submissions, before and after issue 25, side by side.

    .venv/bin/python benchmarks/bench_disk.py [--model smollm2|tiny|PATH] [--mb N] [--submissions 10]

Both sides run the real grader service in this process (intake, journal, events, the same
pruning code) with a stand-in evaluator that reads a SCORE file, so only the disk is measured,
not inference. Each of `--submissions` submissions is a changed model (scores 10, 30, 20, 50, 40,
... : the best moves, as in a real trial):

  before: the agent saves each submission to its own folder (`output/sft-stage<n>`, as the
          reference agents did) and the grader keeps every valid copy;
  after:  the agent rewrites one folder (`output/model`: the grader's copy is made at submit, so
          the agent's folder is free again) and the grader keeps only the copies that can still
          count (pruning.py: the best, the last, pending ones).

It prints the bytes allocated (st_blocks, so copy-on-write clones count once) under
workspace/output and grader/submissions at the end, and the peak. `--mb N` uses a synthetic
safetensors folder of N MB instead of a real model (the figures scale linearly with the size).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

SCORES = [10, 30, 20, 50, 40, 45, 60, 55, 58, 62, 61, 70]
EVALUATOR = r'''
import argparse, json
from pathlib import Path
p = argparse.ArgumentParser()
for n in ("--grader", "--model", "--heldout", "--engine", "--out", "--parent-pid"):
    p.add_argument(n)
a = p.parse_args()
score = float((Path(a.model) / "SCORE").read_text())
Path(a.out).write_text(json.dumps({"score": score, "ci95": [score - 5, score + 5], "n_items": 100,
    "items": [], "metrics": {}, "grader": "bench", "grader_version": "0", "backend": "none",
    "elapsed_s": 0.0, "valid": True, "error": None}))
'''


def allocated(path: Path) -> int:
    """Bytes allocated under `path`, each inode once."""
    seen, total = set(), 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def source_model(args) -> tuple[Path, str]:
    if args.mb:
        folder = Path(tempfile.mkdtemp(prefix="a2c-bench-model-"))
        with open(folder / "model.safetensors", "wb") as fh:
            header = b'{"__metadata__":{"format":"pt"}}'
            fh.write(len(header).to_bytes(8, "little") + header)
            for _ in range(args.mb):
                fh.write(os.urandom(1 << 20))
        (folder / "config.json").write_text('{"model_type": "bench"}')
        return folder, f"synthetic {args.mb} MB safetensors"
    if Path(args.model).is_dir():
        return Path(args.model), args.model
    from a2c.runtime.models import prepare_builtin
    name = {"smollm2": "smollm2-135m-instruct"}.get(args.model, args.model)
    return prepare_builtin(name), name


def write_model(src: Path, dest: Path, i: int) -> None:
    """A changed model: the source's files, one weights byte changed (a distinct hash each time)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest)
    weights = sorted(dest.glob("*.safetensors"))[0]
    with open(weights, "r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([i % 256]))
    (dest / "SCORE").write_text(str(SCORES[i % len(SCORES)]))


def trial(src: Path, tmp: Path, n: int, after: bool) -> dict:
    from a2c.contracts.service_config import ServiceConfig
    from a2c.runtime.grader_service import write_service_config
    from a2c.runtime.grader_service.core import GraderService

    run = tmp / ("after" if after else "before")
    out = run / "workspace" / "output"
    out.mkdir(parents=True)
    (run / "grader").mkdir(parents=True)
    heldout = run / "grader" / "heldout.jsonl"
    heldout.write_text('{"id": "h1", "prompt": "1+1", "answer": "2"}\n')
    evaluator = tmp / "evaluator.py"
    evaluator.write_text(EVALUATOR)
    write_service_config(run, token=secrets.token_hex(16), socket_path=str(run / "g.sock"),
                         host="127.0.0.1", port=0, deadline_unix=time.time() + 3600,
                         max_submissions=1000, min_interval_s=0, eval_timeout_s=600,
                         output_dir=str(out), agent_output_dir="/workspace/output",
                         workspace=str(run / "workspace"), heldout=str(heldout),
                         engine="none", baseline_cache=str(tmp / "cache"), task_id="bench",
                         grader={"kind": "exact_match", "params": {}},
                         evaluator=[sys.executable, str(evaluator)], snapshots=False)
    service = GraderService(ServiceConfig.load(run))
    if not after:
        service._prune = lambda: None    # the grader before issue 25: every valid copy kept
    service.start()
    peak = 0
    started = time.monotonic()
    try:
        for i in range(n):
            folder = "model" if after else f"sft-stage{i + 1}"
            write_model(src, out / folder, i)
            service.submit({"model_path": f"output/{folder}"})
            while not service.idle():
                time.sleep(0.02)
            peak = max(peak, allocated(out) + allocated(service.paths.submissions))
    finally:
        service.stop()
        service.join(30)
    agent, grader = allocated(out), allocated(service.paths.submissions)
    result = {"agent_output_bytes": agent, "grader_copies_bytes": grader,
              "total_bytes": agent + grader, "peak_bytes": peak,
              "grader_copies_kept": len(list(service.paths.submissions.iterdir())),
              "seconds": round(time.monotonic() - started, 1)}
    shutil.rmtree(run, ignore_errors=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 | tiny | a model folder")
    parser.add_argument("--mb", type=int, default=0, help="a synthetic model of N MB instead")
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp folder)")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    src, label = source_model(args)
    model_mb = sum(p.stat().st_size for p in src.rglob("*") if p.is_file()) / 1e6
    tmp = Path(tempfile.mkdtemp(prefix="a2c-bench-disk-", dir=args.dir))
    try:
        before = trial(src, tmp, args.submissions, after=False)
        after = trial(src, tmp, args.submissions, after=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if args.mb:
            shutil.rmtree(src, ignore_errors=True)
    print(f"model: {label} ({model_mb:.0f} MB); {args.submissions} submissions per trial; "
          f"file system: {os.statvfs(str(tmp.parent)).f_bsize} B blocks")
    print(f"{'':24}{'before':>12}{'after':>12}")
    for key in ("agent_output_bytes", "grader_copies_bytes", "total_bytes", "peak_bytes"):
        print(f"{key:24}{before[key] / 1e6:>10.0f}MB{after[key] / 1e6:>10.0f}MB")
    print(f"{'grader_copies_kept':24}{before['grader_copies_kept']:>12}"
          f"{after['grader_copies_kept']:>12}")
    ratio = before["total_bytes"] / max(1, after["total_bytes"])
    print(f"disk per trial: {ratio:.1f}x less after")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": label, "model_mb": model_mb,
                                               "before": before, "after": after,
                                               "ratio": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
