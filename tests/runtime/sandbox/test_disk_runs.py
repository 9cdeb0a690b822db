"""The disk budget and the exit causes on real runs, in both backends (slow; issue 32, class 8):
arith with the tiny model and shell agents.

- an agent writing past `budget.disk` 50M, in its output folder and in its /tmp, is stopped by
  the runtime long before its deadline; run.json and the `agent_exited` event say
  `disk budget exceeded: X of 50M`, the run is `agent_failed`, nothing of it is left;
- an agent whose forks the pids limit refuses, and that then gives up, is named "process limit
  reached", never "out of memory" (a memory limit is set too);
- an honest agent under the default budget is not stopped, and the record says what held.

`local` needs bubblewrap (and root for the cgroup), `docker` an engine; each skips in one line
without. The memory hog still named "out of memory": test_cgroups.py (local) and
test_docker_e2e.py (docker).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pytest
from scripted_agents import make_agent

from a2c.contracts.events import read_events, verify_events
from a2c.runtime import run as run_mod
from a2c.runtime.sandbox.local import bwrap_works
from a2c.runtime.sandbox.proctree import collect

pytestmark = pytest.mark.slow

# 5 MB at a time, fsynced, every 0.1 s, alternately into the output folder (a "checkpoint") and
# /tmp, up to 400 MB: far past a 50M budget, in both places.
FILL = r"""
echo "filling"
python3 - <<'PY'
import os, time
out, tmp = os.environ["A2C_OUTPUT_DIR"], os.environ.get("TMPDIR", "/tmp")
os.makedirs(out, exist_ok=True)
files = [open(os.path.join(out, "ckpt.bin"), "wb"), open(os.path.join(tmp, "cache.bin"), "wb")]
for i in range(80):
    f = files[i % 2]
    f.write(b"x" * (5 << 20)); f.flush(); os.fsync(f.fileno())
    time.sleep(0.1)
print("wrote 400 MB unimpeded", flush=True)
time.sleep(120)
PY
"""

# Forks sleepers until the pids limit refuses one, says so, and gives up (exit 1) a moment later.
FORKS = r"""
echo "forking"
python3 - <<'PY'
import os, sys, time
kids = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        kids += 1
except OSError as exc:
    print(f"fork refused after {kids}: {exc}", flush=True)
time.sleep(2)
sys.exit(1)
PY
"""

HONEST = r"""
echo "working"
python3 -c "
import os
out = os.environ['A2C_OUTPUT_DIR']
os.makedirs(out, exist_ok=True)
open(os.path.join(out, 'small.bin'), 'wb').write(b'x' * (8 << 20))
"
sleep 3
echo done
"""


def _ready(request, backend: str) -> None:
    if backend == "local" and not bwrap_works():
        pytest.skip("no bubblewrap: the local backend's sandbox cannot be checked here")
    if backend == "docker":
        request.getfixturevalue("arith_image")   # skips in one line without an engine


def _run(tmp_path, backend: str, agent: tuple[str, str], budget: str, **limits):
    opts = run_mod.RunOptions(bundle="arith", agent=str(make_agent(tmp_path, *agent)),
                              model="tiny", budget=budget, backend=backend,
                              runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    ctx.run.budget = dataclasses.replace(ctx.run.budget, **limits)
    ctx.save()
    start = time.monotonic()
    summary = run_mod.execute(ctx, report=print)
    run = json.loads((ctx.run_dir / "run.json").read_text())
    exited = [e for e in read_events(ctx.run_dir / "events.jsonl")
              if e["type"] == "agent_exited"][-1]["data"]
    assert verify_events(ctx.run_dir / "events.jsonl").ok
    return ctx, summary, run, exited, time.monotonic() - start


def _log(ctx) -> str:
    return (ctx.run_dir / "logs" / "agent.log").read_text(errors="replace")


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_an_agent_past_its_disk_budget_is_stopped_and_the_run_says_why(tmp_path, request,
                                                                        backend):
    _ready(request, backend)
    ctx, summary, run, exited, took = _run(tmp_path, backend, ("fill", FILL), "120s",
                                           disk_mb=50)
    print(f"{backend}: {exited} in {took:.1f} s")
    assert "filling" in _log(ctx) and "unimpeded" not in _log(ctx)
    cause = run["agent_exit"]["cause"]
    assert run["agent_exit"]["reason"] == "disk_budget", run["agent_exit"]
    assert cause.startswith("disk budget exceeded: ") and " of 50M " in cause, cause
    assert "workspace" in cause and "/tmp" in cause, cause      # both places counted
    assert exited["reason"] == "disk_budget" and exited["cause"] == cause
    assert exited["stop"]["survivors"] == [], exited
    assert summary["status"] == "agent_failed", summary
    assert run["limits"]["disk"]["asked"] == "50M" and run["limits"]["disk"]["enforced"]
    assert run["limits"]["disk"]["exceeded"] == cause
    assert collect(None, None, ctx.run.sandbox_id) == set()
    if backend == "docker":
        import docker
        assert docker.from_env().containers.list(
            all=True, filters={"label": f"a2c.sandbox={ctx.run.sandbox_id}"}) == []


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_refused_fork_is_named_process_limit_not_out_of_memory(tmp_path, request, backend):
    _ready(request, backend)
    if backend == "local" and os.geteuid() != 0:
        pytest.skip("the local backend's pids limit needs a root runtime (its cgroup)")
    ctx, summary, run, exited, _ = _run(tmp_path, backend, ("forks", FORKS), "90s",
                                        pids=64, memory_mb=512)
    print(f"{backend}: {exited}")
    assert "fork refused after" in _log(ctx)
    cause = run["agent_exit"]["cause"] or ""
    assert run["agent_exit"]["reason"] == "exited" and run["agent_exit"]["returncode"] == 1
    assert cause.startswith("process limit reached") and "(64)" in cause, run["agent_exit"]
    assert "memory" not in cause
    assert exited["cause"] == cause and summary["status"] == "agent_failed"


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_an_honest_agent_under_the_default_budget_is_not_stopped(tmp_path, request, backend):
    _ready(request, backend)
    ctx, summary, run, exited, _ = _run(tmp_path, backend, ("honest", HONEST), "60s")
    assert "done" in _log(ctx)
    assert run["agent_exit"] == {"returncode": 0, "reason": "exited"}, run["agent_exit"]
    disk = run["limits"]["disk"]
    assert disk["asked"] == "200G" and disk["enforced"] and "exceeded" not in disk
    assert disk["peak_bytes"] >= 8 << 20 and disk["scans"] >= 1, disk
