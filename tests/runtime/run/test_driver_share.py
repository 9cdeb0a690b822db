"""One vLLM driver server shared by the runs of a node (runtime/run/driver_share.py), against the
stand-in `vllm` (fake_vllm.py).

What is checked: a second run with the same server plan attaches instead of starting another;
the server outlives the run that started it and stops when the last run leaves, or, under a
sweep's hold, when the sweep ends; a run that dies without leaving does not keep it alive; a
different seed is a different server; the record says whether the server was shared and who
started it; `a2c sweep` gives its vllm/ trials the shared folder.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from driver_helpers import fake_model as _model
from driver_helpers import gone_within, process_gone
from test_driver_server import AGENT

from a2c.contracts.driver_server import ShareRecord
from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.runtime.run import driver_plan as dp
from a2c.runtime.run import driver_server as ds
from a2c.runtime.run import driver_share
from a2c.runtime.run.driver import DriverGateway, configure


def _children(log: Path) -> list[int]:
    return [int(x) for x in re.findall(r"FAKE_CHILD (\d+)", log.read_text())]


def _starter(plan):
    def start(log):
        server = ds.VllmServer(log.parent, plan, log=log)
        return server, server.start()
    return start


def test_the_second_run_attaches_and_the_last_to_leave_stops_it(tmp_path, drivers):
    plan = dp.plan(str(_model(tmp_path)), [], seed=3)
    share = tmp_path / "share"
    first = driver_share.SharedServer(share, plan, "run-a")
    second = driver_share.SharedServer(share, plan, "run-b")
    a = first.acquire(_starter(plan))
    b = second.acquire(_starter(plan))
    assert a.started_it and not b.started_it
    assert a.url == b.url and b.started_by == "run-a"
    log = first.dir / "server.log"
    assert len(_children(log)) == 1                       # one server for both
    assert not first.release()                           # run-b still uses it
    child = _children(log)[0]
    assert not process_gone(child)
    assert second.release()                              # the last one stops it
    assert gone_within(child, 20) and not first.state_file.exists()


def test_a_run_that_dies_without_leaving_does_not_keep_the_server(tmp_path, drivers):
    model = _model(tmp_path)
    plan = dp.plan(str(model), [], seed=0)
    share = tmp_path / "share"
    # another process takes a lease (starting the server) and is killed without leaving
    code = (f"import json, sys, time; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from a2c.runtime.run import driver_server as ds, driver_share\n"
            "from a2c.contracts.driver_server import ServerPlan\n"
            f"plan = ServerPlan.from_dict(json.loads({json.dumps(json.dumps(plan.to_dict()))}))\n"
            "def start(log):\n"
            "    s = ds.VllmServer(log.parent, plan, log=log)\n"
            "    return s, s.start()\n"
            f"driver_share.SharedServer({str(share)!r}, plan, 'run-dead').acquire(start)\n"
            "print('ATTACHED', flush=True)\n"
            "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ})
    try:
        assert proc.stdout.readline().strip() == "ATTACHED"
        mine = driver_share.SharedServer(share, plan, "run-alive")
        assert not mine.acquire(_starter(plan)).started_it
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        child = _children(mine.dir / "server.log")[0]
        assert mine.release()                    # the dead run's lease is stale
        assert gone_within(child, 20)
        assert not (mine.dir / "leases" / "run-dead").exists()
    finally:
        proc.kill()
        proc.wait(10)


def test_a_sweep_hold_keeps_the_server_between_trials_and_stops_it_at_the_end(tmp_path,
                                                                              drivers):
    plan = dp.plan(str(_model(tmp_path)), [], seed=0)
    share = tmp_path / "share"
    with driver_share.SweepHold(share):
        one = driver_share.SharedServer(share, plan, "trial-1")
        assert one.acquire(_starter(plan)).started_it
        assert not one.release()                 # held: no one uses it now, it stays
        two = driver_share.SharedServer(share, plan, "trial-2")
        assert not two.acquire(_starter(plan)).started_it   # the next trial reuses it
        assert not two.release()
        child = _children(one.dir / "server.log")[0]
        assert not process_gone(child)
    assert gone_within(child, 20)                     # the sweep's end stops what is idle
    assert driver_share.stop_idle(share) == []


def test_a_different_seed_or_model_is_a_different_server(tmp_path, drivers):
    folder = _model(tmp_path)
    base = dp.plan(str(folder), [], seed=0)
    assert driver_share.server_key(base) == driver_share.server_key(dp.plan(str(folder), [],
                                                                            seed=0))
    assert driver_share.server_key(base) != driver_share.server_key(dp.plan(str(folder), [],
                                                                            seed=1))
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert driver_share.server_key(base) != driver_share.server_key(dp.plan(str(folder), [],
                                                                            seed=0))


def test_shared_runs_record_the_share_and_one_server(tmp_path, drivers):
    folder = _model(tmp_path)
    share = tmp_path / "share"
    gateways = []
    try:
        for name in ("run-x", "run-y"):
            run_dir = tmp_path / name
            (run_dir / "logs").mkdir(parents=True)
            configure(RunPaths(run_dir), f"vllm/{folder}", AGENT, {}, [], 5, share=share)
            gw = DriverGateway(run_dir)
            gw.start()
            gateways.append(gw)
        x, y = (gw.server_record() for gw in gateways)
        assert x.shared == ShareRecord(key=y.shared.key, started_by="run-x",
                                       started_by_this_run=True)
        assert y.shared.started_by == "run-x" and not y.shared.started_by_this_run
        assert x.weights == y.weights and x.version == y.version == "0.0.0-fake"
        assert gateways[0].probe()[0] and gateways[1].probe()[0]
    finally:
        for gw in gateways:
            gw.stop()
    logs = list(share.glob("*/*/server.log"))
    assert len(logs) == 1 and len(_children(logs[0])) == 1
    assert gone_within(_children(logs[0])[0], 20)


def test_sharing_is_for_a_server_a2c_starts(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    with pytest.raises(RunError, match="share-driver-server is for a vllm/ driver"):
        configure(RunPaths(run_dir), "scripted:claude-sonnet-4-5", AGENT, {}, [], 0,
                  share=tmp_path / "share")


def test_sweep_trials_with_a_vllm_driver_share_the_runs_folder_servers(tmp_path):
    from a2c.contracts.trial import Trial
    from a2c.sweep.plan import SHARED_SERVERS, TrialPlan
    trial = Trial.from_dict({"id": "t1", "task": "arith", "agent": "claude-code",
                             "mode": "free", "seed": 0, "driver": "vllm/smollm2-135m-instruct"})
    argv = TrialPlan(trial, tmp_path / "runs" / "t1", tmp_path / "b", tmp_path / "a").run_argv()
    i = argv.index("--share-driver-server")
    assert argv[i + 1] == str(tmp_path / "runs" / SHARED_SERVERS)
    other = Trial.from_dict({**trial.to_dict(), "driver": "anthropic/claude-sonnet-4-5"})
    assert "--share-driver-server" not in TrialPlan(other, tmp_path / "r" / "t1", tmp_path,
                                                    tmp_path).run_argv()


def test_a_share_folder_another_user_could_have_filled_is_refused(tmp_path, drivers):
    """server.json names the URL the gateway forwards to and meters from: a registry folder
    others can write in (or made by another user) is refused before anything is read or started."""
    plan = dp.plan(str(_model(tmp_path)), [], seed=3)
    share = tmp_path / "share"
    host = driver_share.host_dir(share)
    host.mkdir(parents=True)
    host.chmod(0o777)
    planted = host / driver_share.server_key(plan) / "server.json"
    planted.parent.mkdir()
    planted.write_text(json.dumps({"pid": 1, "url": "http://127.0.0.1:9"}))
    shared = driver_share.SharedServer(share, plan, "run-a")

    def start(log):
        raise AssertionError("nothing may start in a folder others can write in")

    with pytest.raises(RunError, match="--share-driver-server: .*writable by others"):
        shared.acquire(start)
    with pytest.raises(RunError, match="writable by others"):
        driver_share.SweepHold(share).__enter__()
    assert json.loads(planted.read_text())["url"] == "http://127.0.0.1:9"   # left as found
    if os.getuid() == 0:
        host.chmod(0o700)
        os.chown(planted.parent, 65534, 65534)
        with pytest.raises(RunError, match="made by uid 65534"):
            shared.acquire(start)
