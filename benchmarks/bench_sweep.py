"""What Ray costs a sweep here: overhead per trial, and trials per minute at 1 and 2 in flight.

1. `a2c run` alone, N times (arith, ref-copy, the tiny model): seconds from the process start to
   the agent's first command (the run's `agent_started` event).
2. `a2c sweep builtin --max-concurrent 1`, then `--max-concurrent 2`, each in a fresh runs folder on
   a local Ray with 2 CPUs: wall time and trials per minute; and, for the sweep's arith/ref-copy
   trials, seconds from the trial's submission to Ray (sweep.json `submitted_at`) to its agent's
   first command. Overhead per trial = that minus the `a2c run` figure; Ray's start (once per
   sweep) is reported apart.

    .venv/bin/python benchmarks/bench_sweep.py [--alone 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "COLUMNS": "200"}


def _ts(text: str) -> float:
    from a2c.timefmt import parse_time
    return parse_time(text)


def agent_started(run_dir: Path) -> float:
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "agent_started":
            return _ts(event["ts"])
    raise SystemExit(f"{run_dir}: no agent_started event")


def alone(work: Path, n: int) -> list[float]:
    out = []
    for i in range(n):
        runs = work / f"alone-{i}"
        start = time.time()
        subprocess.run([sys.executable, "-m", "a2c.cli", "run", "arith", "--agent", "ref-copy",
                        "--model", "tiny", "--budget", "90s", "--runs-dir", str(runs)],
                       cwd=ROOT, env=ENV, check=True, capture_output=True)
        (run_dir,) = [p for p in runs.iterdir() if (p / "run.json").is_file()]
        out.append(agent_started(run_dir) - start)
    return out


def sweep(work: Path, concurrent: int) -> dict:
    runs = work / f"sweep-{concurrent}"
    start = time.time()
    subprocess.run([sys.executable, "-m", "a2c.cli", "sweep", "builtin", "--runs-dir", str(runs),
                    "--max-concurrent", str(concurrent), "--num-cpus", "2"],
                   cwd=ROOT, env=ENV, check=True, capture_output=True)
    wall = time.time() - start
    record = json.loads((runs / "sweep.json").read_text())
    trials = record["trials"]
    assert all(t["status"] == "finished" for t in trials), trials
    first_submit = min(_ts(t["submitted_at"]) for t in trials)
    to_agent = [agent_started(Path(t["run_dir"])) - _ts(t["submitted_at"]) for t in trials
                if t["task"] == "arith" and t["agent"] == "ref-copy"]
    return {"wall_s": wall, "trials": len(trials), "per_min": len(trials) / wall * 60,
            "ray_start_s": first_submit - start, "to_agent_s": to_agent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alone", type=int, default=3, help="a2c run repetitions (3)")
    parser.add_argument("--keep", help="keep the runs in this folder")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="a2c-bench-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        base = alone(work, args.alone)
        one = sweep(work, 1)
        two = sweep(work, 2)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    base_s = statistics.median(base)
    print(f"machine: {os.cpu_count()} CPUs; local Ray with 2 CPUs; suite builtin "
          f"({one['trials']} trials: arith x ref-sft/ref-copy, textquest x ref-copy, 2 seeds)")
    print(f"a2c run alone, start to first agent command: median {base_s:.2f}s "
          f"({', '.join(f'{v:.2f}' for v in base)})")
    for name, res in (("--max-concurrent 1", one), ("--max-concurrent 2", two)):
        via = statistics.median(res["to_agent_s"])
        print(f"{name}: {res['wall_s']:.1f}s wall, {res['per_min']:.1f} trials/min; Ray start "
              f"{res['ray_start_s']:.1f}s once; a trial's submission to its first agent command "
              f"median {via:.2f}s, overhead per trial {via - base_s:+.2f}s")
    print(f"speed-up of 2 in flight over 1: {two['per_min'] / one['per_min']:.2f}x")


if __name__ == "__main__":
    main()
