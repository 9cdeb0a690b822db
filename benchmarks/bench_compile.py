"""Time to validate and build every shipped spec (the issue asks for "well under a second").

Prints the median over several rounds of: validate all (load + schema + semantic checks),
compile all in memory, and write all bundles to a temp dir; plus the per-spec cost and the
build/validate ratio. The first round (imports, schema compilation, template parsing) is reported
separately as the cold start. Usage: python benchmarks/bench_compile.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path


def main(rounds: int = 7) -> int:
    t0 = time.perf_counter()
    from a2c.compiler.build import COMPILERS, load_all, write_artifact
    from a2c.compiler.load import discover
    from a2c.paths import PACKAGE_ROOT
    import_s = time.perf_counter() - t0

    specs = discover(PACKAGE_ROOT / "specs")
    results = {"validate": [], "compile": [], "write": [], "total": []}
    cold = None
    for i in range(rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            a = time.perf_counter()
            docs = load_all(specs)
            b = time.perf_counter()
            artifacts = [COMPILERS[d.kind](d) for d in docs]
            c = time.perf_counter()
            for art in artifacts:
                write_artifact(art, Path(tmp))
            d = time.perf_counter()
        row = {"validate": b - a, "compile": c - b, "write": d - c, "total": d - a}
        if i == 0:
            cold = row
            continue
        for key, value in row.items():
            results[key].append(value)
    med = {k: statistics.median(v) for k, v in results.items()}
    n = len(specs)
    print(f"specs: {n} ({sum(1 for s in specs if s.parent.name == 'tasks')} tasks, "
          f"{sum(1 for s in specs if s.parent.name == 'agents')} agents, "
          f"{sum(1 for s in specs if s.parent.name == 'suites')} suites); rounds: {rounds}")
    print(f"import of the compiler: {import_s * 1000:.0f} ms")
    print(f"cold first round (schemas, templates): {cold['total'] * 1000:.0f} ms")
    print(f"validate all: {med['validate'] * 1000:.1f} ms   compile all: "
          f"{med['compile'] * 1000:.1f} ms   write all: {med['write'] * 1000:.1f} ms")
    print(f"validate + build all shipped specs: {med['total'] * 1000:.1f} ms "
          f"({med['total'] / n * 1000:.2f} ms per spec)")
    print(f"ratio build (compile + write) / validate: "
          f"{(med['compile'] + med['write']) / med['validate']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
