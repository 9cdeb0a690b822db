"""How long `a2c report` takes on a long run: 200 submissions and 200 code snapshots.

Builds the run with tests/fixtures/runs/make_fixture_run.py (deterministic; real git repository),
then times verification alone, building report.json, and the full `write_report` (verify + build +
Markdown + SVG + HTML), each the best of --repeat runs, and prints the figures and ratios.

    .venv/bin/python benchmarks/bench_report.py [--n 200] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _maker():
    path = ROOT / "tests" / "fixtures" / "runs" / "make_fixture_run.py"
    spec = importlib.util.spec_from_file_location("a2c_make_fixture_run", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="submissions (one snapshot each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", default=None, help="build the run here and keep it")
    args = parser.parse_args()

    from a2c.analysis.report import build_report, write_report
    from a2c.analysis.verify import verify_run

    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="a2c-bench-"))
    try:
        start = time.perf_counter()
        run = _maker().make_run(workdir / "run", n=args.n)
        build_s = time.perf_counter() - start
        verify_s = best_of(args.repeat, lambda: verify_run(run))
        report_s = best_of(args.repeat, lambda: build_report(run))
        write_s = best_of(args.repeat, lambda: write_report(run, workdir / "report"))
        report, paths = write_report(run, workdir / "report")
        n_snap = report["metrics"]["n_snapshots"]
        sizes = {k: p.stat().st_size for k, p in paths.items()}
        print(f"run: {report['metrics']['n_submissions']} submissions, {n_snap} snapshots, "
              f"{len(report['timeline'])} timeline steps (built in {build_s:.2f} s)")
        print(f"verify only:            {verify_s:7.3f} s")
        print(f"build report.json:      {report_s:7.3f} s  (includes verify)")
        print(f"a2c report (all files): {write_s:7.3f} s")
        print(f"per submission:         {1000 * write_s / max(1, args.n):7.2f} ms")
        print(f"report / verify ratio:  {write_s / verify_s:7.1f}x")
        print("sizes: " + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sizes.items()))
        return 0 if write_s < 10 else 1
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
