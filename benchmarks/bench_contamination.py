"""What the contamination check (analysis/contamination.py) costs next to a run's grading.

For each run directory given (or found under --runs), times `check_run` (best of --repeat) and
sums the run's grading time — the `elapsed_s` of its submission_scored, baseline_scored and
final_scored events — and prints them side by side with the ratio (the target: under 5 %), and
what the check found (flagged, matched items), so the false-positive figures come from the same
command.

    .venv/bin/python benchmarks/bench_contamination.py RUN_DIR... [--runs DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from a2c.analysis.contamination import check_run
from a2c.analysis.leaderboard import find_runs

GRADING_EVENTS = ("submission_scored", "baseline_scored", "final_scored")


def grading_seconds(run_dir: Path) -> float:
    total = 0.0
    for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") in GRADING_EVENTS:
            elapsed = (event.get("data") or {}).get("elapsed_s")
            total += float(elapsed) if isinstance(elapsed, (int, float)) else 0.0
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--runs-dir", type=Path, action="append", default=[])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = list(args.runs) + [r for d in args.runs_dir for r in find_runs(d)]
    print(f"{'run':55} {'check s':>8} {'grading s':>10} {'ratio':>7}  flagged matched/items")
    for run in runs:
        times, section = [], None
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            section = check_run(run)
            times.append(time.perf_counter() - start)
        check, grading = min(times), grading_seconds(run)
        ratio = f"{100 * check / grading:6.2f}%" if grading else "    n/a"
        print(f"{run.name[:55]:55} {check:8.3f} {grading:10.1f} {ratio}  "
              f"{str(section['flagged']):7} {section['run']['count']}/{section['n_items']}")


if __name__ == "__main__":
    main()
