"""The local backend's resource limits on real runs (runtime/sandbox/cgroups.py; the files it
writes, both versions, on a fake cgroupfs: test_cgroups_files.py). Real runs on `arith` with the
tiny model and shell agents: a memory hog under 1g is killed and recorded as out of memory while
the grader keeps answering `/time`; a fork bomb under pids 256 stays inside it and is gone at the
deadline; two busy loops under cpus 0.5 get about half a core. Root only (one line otherwise)."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path

import pytest

from a2c.contracts.events import verify_events
from a2c.runtime import run as run_mod
from a2c.runtime.sandbox.cgroup_limits import Limits
from a2c.runtime.sandbox.cgroups import CGROUP_ROOT, AgentCgroup, detect
from a2c.runtime.sandbox.proctree import collect

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="cgroup limits need a root runtime"),
              pytest.mark.skipif(detect()[0] is None, reason="no cgroup filesystem here")]

HOG = r"""
echo "allocating 2 GB, 32 MB at a time"
python3 -c "
import time
chunks = []
for _ in range(64):
    chunks.append(bytearray(32 * 1024 * 1024))   # touched: bytearray zero-fills
    time.sleep(0.05)
print('still', 'alive at 2 GB')
"
"""

FORK_BOMB = r"""
echo "forking"
bomb() { bomb | bomb & }
bomb
exec sleep 300    # no fork: under the exhausted pids limit a forked sleep can fail and end the agent
"""

BUSY = r"""
echo "spinning"
( while :; do :; done ) &
while :; do :; done
"""


def _prepare(tmp_path, agent, budget: str, **limits):
    from scripted_agents import make_agent
    opts = run_mod.RunOptions(bundle="arith", agent=str(make_agent(tmp_path, *agent)),
                              model="tiny", budget=budget, runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    ctx.run.budget = dataclasses.replace(ctx.run.budget, **limits)
    ctx.save()
    return ctx


def _in_background(ctx) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(run_mod.execute(ctx, report=print)))
    thread.start()
    return thread, out


def _cgroup_of(ctx) -> AgentCgroup:
    """The run's cgroup as the backend made it (found by the run's marker), to read from."""
    marker = ctx.run.sandbox_id
    version, _ = detect()
    if version == "v2":
        dirs = {"": CGROUP_ROOT / "a2c" / marker}
    else:
        dirs = {c: next((CGROUP_ROOT / c).glob(f"**/a2c-{marker}"), None)
                for c in ("memory", "cpuacct", "pids")}
        dirs = {c: d for c, d in dirs.items() if d is not None}
    return AgentCgroup(marker, version, dirs, Limits())


def _wait_for(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _gone(ctx) -> None:
    assert collect(None, None, ctx.run.sandbox_id) == set()
    assert not list(CGROUP_ROOT.glob(f"*/**/a2c-{ctx.run.sandbox_id}"))
    assert not (CGROUP_ROOT / "a2c" / ctx.run.sandbox_id).exists()


def test_memory_hog_is_killed_as_oom_while_the_grader_keeps_answering(tmp_path):
    from a2c.contracts.service_config import read_service_fields
    from a2c.runtime.grader_service.client import ServiceClient
    ctx = _prepare(tmp_path, ("hog", HOG), "90s", memory_mb=1024)
    thread, summary = _in_background(ctx)
    assert _wait_for(lambda: "allocating" in _log(ctx), 120), "the agent never started"
    svc = read_service_fields(ctx.run_dir)
    client = ServiceClient(f"unix:{svc['socket_path']}", svc["token"], timeout=5)
    latencies = []
    while not _agent_exited(ctx) and len(latencies) < 400:   # throughout the hog
        start = time.monotonic()
        client.time()
        latencies.append(time.monotonic() - start)
        time.sleep(0.1)
    thread.join(120)
    run = json.loads((ctx.run_dir / "run.json").read_text())
    print(f"/time answered {len(latencies)} times, slowest {max(latencies):.3f} s")
    assert "still alive" not in _log(ctx)
    assert run["limits"]["memory"] == {"asked": "1024m", "enforced": True}
    assert run["agent_exit"]["reason"] == "exited", run["agent_exit"]
    assert run["agent_exit"]["cause"].startswith("out of memory"), run["agent_exit"]
    assert "1024m" in run["agent_exit"]["cause"]
    assert summary["status"] == "agent_failed", summary
    assert len(latencies) >= 3 and max(latencies) < 1.0, latencies
    assert verify_events(ctx.run_dir / "events.jsonl").ok
    _gone(ctx)


def test_fork_bomb_stays_inside_its_pids_limit_and_is_gone_at_the_deadline(tmp_path):
    before = len(os.listdir("/proc"))
    ctx = _prepare(tmp_path, ("bomb", FORK_BOMB), "25s", pids=256, cpus=1)
    thread, summary = _in_background(ctx)
    peak, inside = 0, 0
    assert _wait_for(lambda: "forking" in _log(ctx), 120), "the agent never started"
    group = _cgroup_of(ctx)
    while thread.is_alive():
        peak = max(peak, sum(name.isdigit() for name in os.listdir("/proc")))
        inside = max(inside, len(group.procs()))
        time.sleep(0.2)
    thread.join()
    run = json.loads((ctx.run_dir / "run.json").read_text())
    print(f"processes on the host: {before} before, at most {peak} during; at most {inside} in "
          "the agent's cgroup")
    assert run["limits"]["pids"] == {"asked": 256, "enforced": True}
    assert 16 < inside <= 256
    assert peak < before + 256 + 64      # the runtime's own (grader, snapshots) besides
    assert run["agent_exit"]["reason"] == "deadline" and summary["status"] == "no_submission"
    _gone(ctx)


def test_two_busy_loops_under_half_a_cpu_get_about_half_a_core(tmp_path):
    ctx = _prepare(tmp_path, ("busy", BUSY), "20s", cpus=0.5)
    thread, _ = _in_background(ctx)
    assert _wait_for(lambda: "spinning" in _log(ctx), 120), "the agent never started"
    group = _cgroup_of(ctx)
    time.sleep(1.0)
    used, start = group.cpu_usage_s(), time.monotonic()
    time.sleep(3.0)
    cores = (group.cpu_usage_s() - used) / (time.monotonic() - start)
    thread.join()
    run = json.loads((ctx.run_dir / "run.json").read_text())
    print(f"two busy loops under cpus 0.5: {cores:.2f} cores")
    assert run["limits"]["cpus"] == {"asked": 0.5, "enforced": True}
    assert 0.3 <= cores <= 0.7, cores
    _gone(ctx)


def _log(ctx) -> str:
    path = Path(ctx.run_dir) / "logs" / "agent.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def _agent_exited(ctx) -> bool:
    path = Path(ctx.run_dir) / "events.jsonl"
    return path.is_file() and '"agent_exited"' in path.read_text(errors="replace")
