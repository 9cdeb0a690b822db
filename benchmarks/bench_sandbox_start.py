"""Local sandbox start to first command: bubblewrap as before issue 24, with its new options, and
with cgroup limits, side by side in one run.

1. before: the options on bubblewrap's command line, a tmpfs /tmp, user namespaces left to the
   agent (no inner bubblewrap), no GPU, no limits.
2. new: the options through `--args FD`, /tmp = RUN/agent-tmp, and (as root) the inner
   unprivileged bubblewrap that disables user namespaces (privileges.nested_userns_argv).
3. new + cgroup: the same with `memory_mb`, `cpus` and `pids` limits (runtime/sandbox/cgroups.py:
   the cgroup made, written and entered before exec, removed at close).

Each: `backend.start(spec)` with `date +%s.%N > first`, seconds from the call to the time the
command wrote, N times, the variants alternating (the first round warms up and is dropped); the
median of each, the differences and the ratios to "before". Issue 24 asks for new within 50 ms.

    .venv/bin/python benchmarks/bench_sandbox_start.py [--n 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def spec_for(root: Path, marker: str, variant: str):
    from a2c.runtime.sandbox import SandboxSpec
    for name in ("workspace", "data", "model", "logs"):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "data" / "train.jsonl").write_text('{"id": "1"}\n')
    (root / "model" / "config.json").write_text("{}")
    spec = SandboxSpec(command=["bash", "-c", "date +%s.%N > /workspace/first"],
                       workspace=root / "workspace", data_dir=root / "data",
                       model_dir=root / "model", socket_path=None,
                       log_path=root / "logs" / "agent.log",
                       command_log=root / "logs" / "commands.log", marker=marker)
    if variant != "before":
        spec.agent_tmp = root / "agent-tmp"
    if variant == "new+cgroup":
        spec.mem_limit, spec.cpus, spec.pids = "4096m", 1.0, 1024
    return spec


def backends() -> dict:
    from a2c.runtime.sandbox.local import LocalBackend
    before = LocalBackend(use_bwrap=True)
    before.lock_userns, before.args_via_fd = False, False
    new = LocalBackend(use_bwrap=True)
    return {"before": before, "new": new, "new+cgroup": new}


def first_command(backend, root: Path, marker: str, variant: str) -> float:
    spec = spec_for(root, marker, variant)
    start = time.time()
    proc = backend.start(spec)
    proc.wait(60)
    first = float((spec.workspace / "first").read_text().strip())
    proc.close()
    return first - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    variants = backends()
    print(f"inner bubblewrap disabling user namespaces: {variants['new'].lock_userns}")
    tmp = Path(tempfile.mkdtemp(prefix="a2c-bench-sandbox-"))
    times: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for i in range(args.n + 1):          # round 0 warms up and is dropped
            for name, backend in variants.items():
                took = first_command(backend, tmp / f"{name}-{i}", f"bench-sb-{i}-{name}", name)
                if i:
                    times[name].append(took)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["before"])
    print(f"start to first command, median of {args.n} (seconds):")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<11} {median:.4f}  (min {min(values):.4f}, max {max(values):.4f})  "
              f"{(median - base) * 1000:+.1f} ms  ratio {median / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
