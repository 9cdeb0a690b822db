"""The engine on a local Ray that declares 2 GPUs (logical: no GPU is needed to check the
bookkeeping): a trial's agent and grader get *different* GPUs, a trial holding both leaves no room
for a second at the same time, and `a2c run` gets them as --gpus and --grader-gpus. A stand-in
command plays `a2c run` (it records its arguments and writes an ended run.json), so this
checks Ray's placement, not a training run. Slow: it starts Ray."""

from __future__ import annotations

import json
import sys

import pytest

from a2c.contracts.trial import Trial
from a2c.sweep.plan import TrialPlan

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
ray = pytest.importorskip("ray")

STAND_IN = """
import json, os, sys, time
argv = sys.argv[1:]
run_dir = os.path.join(argv[argv.index("--runs-dir") + 1], argv[argv.index("--run-id") + 1])
os.makedirs(run_dir)
start = time.time()
time.sleep(1.5)
json.dump({"status": "finished", "best_score": 1.0, "start": start, "end": time.time(),
           "agent_gpus": argv[argv.index("--gpus") + 1],
           "eval_gpus": argv[argv.index("--grader-gpus") + 1]},
          open(os.path.join(run_dir, "run.json"), "w"))
"""


def test_the_grader_device_is_held_apart(tmp_path):
    from a2c.sweep.engine import SweepEvents, connect, run_sweep
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    runs = tmp_path / "runs"
    plans = [TrialPlan(Trial(id=f"t{i}", task="arith", agent="ref-sft", seed=i,
                             resources={"agent": {"CPU": 0.5, "GPU": 1.0},
                                        "grader": {"CPU": 0.5, "GPU": 1.0}}),
                       runs / f"t{i}", tmp_path / "task", tmp_path / "agent") for i in range(2)]
    try:
        result = run_sweep(lambda: connect(None, num_cpus=2, num_gpus=2), plans, runs,
                           verify=lambda _: None, events=SweepEvents(),
                           max_concurrent=2, command=[sys.executable, str(script)])
    finally:
        ray.shutdown()
    assert {o.status for o in result.outcomes.values()} == {"finished"}, result.outcomes
    infos = [json.loads((runs / f"t{i}" / "run.json").read_text()) for i in range(2)]
    for info in infos:
        assert info["agent_gpus"] in ("0", "1") and info["eval_gpus"] in ("0", "1")
        assert info["agent_gpus"] != info["eval_gpus"], info
    # Each trial holds both GPUs: submitted together, they ran one after the other.
    first, second = sorted(infos, key=lambda i: i["start"])
    assert second["start"] >= first["end"] - 0.05, infos

