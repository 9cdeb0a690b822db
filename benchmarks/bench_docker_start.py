"""Container start against bubblewrap's, side by side in one run.

1. Start to first command: `backend.start(spec)` with the command `date +%s.%N > first` (the same
   spec for both: workspace, data, model, command log, the agent's uid), seconds from the call to
   the time the command wrote, N times each, alternating; the median and the ratio docker/local.
   Docker's figure includes staging the agent's a2c packages and creating the container.
2. Image reuse: `DockerBackend.prepare_image` for arith + ref-sft when the image exists (what every
   run after the first pays), N times; the median. The one-time build is `a2c images build arith
   --agent ref-sft` (its figure is printed by that command).

    .venv/bin/python benchmarks/bench_docker_start.py [--n 10]

Needs bubblewrap and a Docker engine (bash scripts/docker_engine.sh) and the arith image (built on
first use; minutes).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def spec_for(root: Path, marker: str):
    from a2c.runtime.sandbox import SandboxSpec
    for name in ("workspace", "data", "model", "logs"):
        (root / name).mkdir(parents=True, exist_ok=True)
    (root / "data" / "train.jsonl").write_text('{"id": "1"}\n')
    (root / "model" / "config.json").write_text("{}")
    return SandboxSpec(command=["bash", "-c", "date +%s.%N > /workspace/first"],
                       workspace=root / "workspace", data_dir=root / "data",
                       model_dir=root / "model", socket_path=None,
                       log_path=root / "logs" / "agent.log",
                       command_log=root / "logs" / "commands.log", marker=marker)


def first_command(backend, root: Path, marker: str, image: str | None = None) -> float:
    spec = spec_for(root, marker)
    spec.image = image
    (spec.workspace / "first").unlink(missing_ok=True)
    start = time.time()
    proc = backend.start(spec)
    proc.wait(60)
    first = float((spec.workspace / "first").read_text().strip())
    if hasattr(proc, "close"):
        proc.close()
    return first - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    args = parser.parse_args()
    from a2c.runtime.run.resolve import resolve_agent_bundle, resolve_task_bundle
    from a2c.runtime.sandbox import get_backend
    local = get_backend("local", use_bwrap=True)
    docker = get_backend("docker", report=lambda _: None)
    task, agent = resolve_task_bundle("arith"), resolve_agent_bundle("ref-sft")
    built = docker.prepare_image(task, agent)
    print(f"image {built.tag}: {'built' if built.built else 'present'} "
          f"({built.seconds:.1f} s{'; ' + str(built.steps) if built.steps else ''})")

    tmp = Path(tempfile.mkdtemp(prefix="a2c-bench-docker-"))
    try:
        times: dict[str, list[float]] = {"local": [], "docker": []}
        for i in range(args.n + 1):          # the first round warms both up and is dropped
            for name, backend in (("local", local), ("docker", docker)):
                took = first_command(backend, tmp / f"{name}-{i}", f"bench-{name}-{i}",
                                     built.tag if name == "docker" else None)
                if i:
                    times[name].append(took)
        reuse = []
        for _ in range(args.n):
            start = time.monotonic()
            docker.prepare_image(task, agent)
            reuse.append(time.monotonic() - start)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bw, dk = statistics.median(times["local"]), statistics.median(times["docker"])
    print(f"{'':<34}{'bubblewrap':>12}{'docker':>12}{'ratio':>9}")
    print(f"{'start to first command (median)':<34}{bw * 1000:>10.0f}ms{dk * 1000:>10.0f}ms"
          f"{dk / bw:>8.1f}x")
    print(f"{'  min .. max':<34}{min(times['local']) * 1000:>5.0f}-{max(times['local']) * 1000:<4.0f}ms"
          f"{min(times['docker']) * 1000:>6.0f}-{max(times['docker']) * 1000:<4.0f}ms")
    rt = statistics.median(reuse)
    print(f"{'image reuse (median, docker only)':<34}{'':>12}{rt * 1000:>10.1f}ms"
          f"{rt / bw:>8.2f}x of a bubblewrap start")
    print(f"(n = {args.n} each, alternating, after one warm-up round)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
