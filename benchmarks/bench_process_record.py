"""The process recorder's CPU share during a training run (issue 32, class 2).

An "agent" runs in the local sandbox (bubblewrap where it works) for `--seconds`: a torch training
loop (a small transformer-sized MLP, all CPU threads it gets, checkpoints written to
output/ every few seconds) and, beside it, a shell that starts a short command every half second
(ls, cat, python -c) as agents do. The runtime's process recorder (runtime/process_record.py)
watches it at `--interval` seconds. Printed: the recorder's own CPU seconds (its thread's
thread_time, from the record's stop line), the agent's CPU seconds (every process of the
training process, its own process_time at the end: every thread of it), their ratio, the recorder's share of one core
over the wall clock, its samples and the mean and worst time a sample took.

    .venv/bin/python benchmarks/bench_process_record.py [--seconds 60] [--interval 0.2]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

TRAIN = r'''
import os, time, torch
torch.manual_seed(0)
seconds = float(os.environ["BENCH_SECONDS"])
out = os.path.join(os.environ["A2C_OUTPUT_DIR"], "final")
os.makedirs(out, exist_ok=True)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(),
                            torch.nn.Linear(2048, 512))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
start, steps, saved = time.time(), 0, 0.0
while time.time() - start < seconds:
    x = torch.randn(256, 512)
    loss = ((model(x) - x) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    steps += 1
    if time.time() - saved > 5:
        torch.save(model.state_dict(), os.path.join(out, "model.pt"))
        saved = time.time()
print(f"steps {steps} cpu {time.process_time():.3f}")
'''

AGENT = r'''cd "$A2C_WORKSPACE"
python3 train.py &
end=$((SECONDS + ${BENCH_SECONDS%.*}))
while [ $SECONDS -lt $end ]; do
  ls -la > /dev/null; cat train.py > /dev/null; python3 -c 'print(1)' > /dev/null
  sleep 0.5
done
wait
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args()
    from a2c.contracts.run_paths import RunPaths
    from a2c.runtime.process_record import record_agent
    from a2c.runtime.sandbox import SandboxSpec
    from a2c.runtime.sandbox.local import LocalBackend

    tmp = Path(tempfile.mkdtemp(prefix="a2c-bench-record-"))
    try:
        paths = RunPaths(tmp / "run")
        for folder in (paths.workspace / "output", paths.logs, paths.data, tmp / "model",
                       paths.agent_tmp, paths.agent):
            folder.mkdir(parents=True, exist_ok=True)
        (paths.workspace / "train.py").write_text(TRAIN)
        (paths.agent / "run.sh").write_text(AGENT)
        backend = LocalBackend()
        confined = backend.isolation == "bubblewrap"
        spec = SandboxSpec(command=["bash", "/run/a2c/agent/run.sh" if confined
                                    else str(paths.agent / "run.sh")],
                           workspace=paths.workspace, data_dir=paths.data,
                           model_dir=tmp / "model", socket_path=None, log_path=paths.agent_log,
                           command_log=paths.commands_log, marker=f"bench-{time.time_ns()}",
                           extra_ro={"/run/a2c/agent": paths.agent}, agent_tmp=paths.agent_tmp,
                           env={"BENCH_SECONDS": str(args.seconds)})
        wall0 = time.monotonic()
        proc = backend.start(spec)
        recorder = record_agent(paths, proc, backend, {}, args.interval)
        proc.wait(args.seconds + 120)
        summary = recorder.stop()
        wall = time.monotonic() - wall0
        proc.stop(grace=1.0)
        last = (paths.agent_log.read_text(errors="replace").strip().splitlines() or [""])[-1]
        match = re.search(r"steps (\d+) cpu ([\d.]+)", last)
        if not match:
            print(f"the training did not report its CPU time: {last}")
            return 1
        agent_cpu = float(match.group(2))
        stopped = [json.loads(line) for line in (paths.logs / "processes.jsonl").read_text()
                   .splitlines() if '"kind": "stopped"' in line][-1]
        rec_cpu = float(summary["cpu_s"])
        print(f"isolation {backend.isolation}, interval {args.interval}s, wall {wall:.1f}s, "
              f"{summary['processes']} process images recorded, {summary['samples']} samples")
        print(f"training CPU {agent_cpu:.2f}s ({agent_cpu / wall:.2f} cores, {match.group(1)} "
              f"steps); recorder CPU "
              f"{rec_cpu:.3f}s")
        print(f"recorder / training CPU: {rec_cpu / agent_cpu:.3%}; recorder share of one core: "
              f"{rec_cpu / wall:.3%}")
        print(f"per sample: mean {1000 * rec_cpu / max(1, summary['samples']):.2f} ms CPU, "
              f"worst {1000 * stopped['max_sample_s']:.1f} ms wall")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
