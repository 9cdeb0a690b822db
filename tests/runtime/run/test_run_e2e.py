"""End-to-end runs on the built-in arithmetic task with the tiny model and shell "agents":
the deadline stops a whole process tree (what the sandbox hides: tests/runtime/sandbox/
test_escape_both_backends.py, in both backends),
the record is tamper-evident, and a run survives a SIGKILL of the runtime."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime

import pytest

from a2c.contracts.events import read_events, verify_events
from a2c.runtime import run as run_mod
from a2c.runtime.sandbox.local import bwrap_works
from a2c.runtime.sandbox.proctree import collect

HAVE_BWRAP = bwrap_works()


def _ts(event) -> float:
    return datetime.strptime(event["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def _run(tmp_path, agent_dir, budget, **kw):
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent_dir), model="tiny", budget=budget,
                              runs_dir=tmp_path / "runs", **kw)
    ctx = run_mod.prepare(opts, report=lambda _: None)
    return ctx


TREE = r"""
sleep 300 &
( sleep 300 & sleep 300 ) &
setsid sh -c 'sleep 300 & sleep 300' &
( setsid sleep 301 & ) &
trap '' TERM
echo "tree started"
wait
"""


@pytest.mark.slow
@pytest.mark.parametrize("use_bwrap", [None, False])
def test_deadline_stops_whole_tree_within_5s(tmp_path, agent_factory, use_bwrap, monkeypatch):
    if use_bwrap is False:  # as root the unconfined agent is refused unless explicitly allowed
        monkeypatch.setenv("A2C_UNSAFE_ROOT_AGENT", "1")
    agent = agent_factory("forker", TREE)
    ctx = _run(tmp_path, agent, "6s", snapshot_every_s=2, use_bwrap=use_bwrap)
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["status"] == "no_submission"   # stopped at the deadline, nothing submitted
    events = read_events(ctx.run_dir / "events.jsonl")
    types = [e["type"] for e in events]
    for needed in ("run_started", "baseline_scored", "budget_warning", "deadline_reached",
                   "agent_exited", "snapshot", "run_finished"):
        assert needed in types, types
    deadline = next(e for e in events if e["type"] == "deadline_reached")
    exited = next(e for e in events if e["type"] == "agent_exited")
    assert exited["data"]["reason"] == "deadline"
    assert exited["data"]["stop"]["survivors"] == []
    assert _ts(exited) - _ts(deadline) < 5.0
    reasons = [e["data"].get("reason") for e in events if e["type"] == "snapshot"]
    assert "periodic" in reasons and "final" in reasons, reasons
    assert collect(None, None, ctx.run.sandbox_id) == set()
    run = json.loads((ctx.run_dir / "run.json").read_text())
    assert run["status"] == "no_submission" and run["submissions"] == 0
    assert run["isolation"] == ("none" if use_bwrap is False else
                                ("bubblewrap" if HAVE_BWRAP else "none"))
    for key in ("run_id", "task", "level", "agent", "driver", "mode", "seed", "base_model",
                "bundle_digest", "spec_hash", "isolation", "budget", "baseline_score",
                "best_score", "final_score", "submissions", "valid_submissions", "status",
                "started_at", "ended_at", "deadline", "versions"):
        assert key in run, key
    assert run["baseline_score"] is not None
    assert verify_events(ctx.run_dir / "events.jsonl").ok
    assert "tree started" in (ctx.run_dir / "logs" / "agent.log").read_text()
    assert (ctx.run_dir / "logs" / "transcript.log").is_file()


@pytest.mark.slow
def test_tampering_with_one_event_is_detected(tmp_path, agent_factory):
    agent = agent_factory("quick", "echo hello\n")
    ctx = _run(tmp_path, agent, "30s")
    run_mod.execute(ctx, report=lambda _: None)
    path = ctx.run_dir / "events.jsonl"
    assert verify_events(path).ok
    lines = path.read_text().splitlines()
    event = json.loads(lines[1])
    event["data"]["score"] = 99.0
    lines[1] = json.dumps(event, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    check = verify_events(path)
    assert not check.ok and check.bad_line == 2


SUBMIT_THEN_SLEEP = r"""
if [ ! -d "$A2C_OUTPUT_DIR/copy" ]; then   # a relaunched agent finds its earlier work
    cp -r "$A2C_BASE_MODEL" "$A2C_OUTPUT_DIR/copy"
    python3 a2c_client.py submit "$A2C_OUTPUT_DIR/copy" --note copy
    echo submitted
fi
sleep 300
"""

DRIVER = """
import sys
from a2c.runtime import run as run_mod
ctx = run_mod.RunContext.load(sys.argv[1])
run_mod.execute(ctx)
"""


@pytest.mark.slow
def test_resume_after_sigkill_of_the_runtime(tmp_path, agent_factory):
    agent = agent_factory("submitter", SUBMIT_THEN_SLEEP)
    ctx = _run(tmp_path, agent, "40s")
    log = open(tmp_path / "runtime.log", "wb")
    runtime = subprocess.Popen([sys.executable, "-c", DRIVER, str(ctx.run_dir)], stdout=log,
                               stderr=subprocess.STDOUT)
    journal = ctx.run_dir / "submissions.jsonl"
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if journal.exists() and '"received"' in journal.read_text():
            break
        assert runtime.poll() is None, (tmp_path / "runtime.log").read_text()
        time.sleep(0.2)
    else:
        pytest.fail("no submission was received")
    runtime.send_signal(signal.SIGKILL)
    runtime.wait()
    before = json.loads((ctx.run_dir / "run.json").read_text())
    assert before["status"] == "running"
    summary = run_mod.resume(ctx.run_dir, report=lambda _: None)
    assert summary["status"] == "finished"
    after = json.loads((ctx.run_dir / "run.json").read_text())
    assert after["deadline"] == before["deadline"]
    events = read_events(ctx.run_dir / "events.jsonl")
    types = [e["type"] for e in events]
    assert "run_resumed" in types and types[-2:] == ["run_finished", "record_sealed"]
    assert verify_events(ctx.run_dir / "events.jsonl").ok
    state = run_mod.journal_state(ctx.run_dir)
    assert state["pending"] == [] and len(state["scored"]) == 1
    (scored,) = state["scored"].values()
    assert scored["copy_of_base"] is True
    assert after["best_score"] == after["baseline_score"]
    assert collect(None, None, after["sandbox_id"]) == set()
    service_pid = int((ctx.run_dir / "grader" / "service.pid").read_text())
    assert not os.path.exists(f"/proc/{service_pid}") or \
        open(f"/proc/{service_pid}/stat").read().split()[2] == "Z"


@pytest.mark.slow
def test_a_long_run_path_leaves_no_socket_folder_behind(tmp_path, agent_factory):
    """A run folder too long for a Unix socket path puts its sockets in a short folder under
    the system's temporary directory; the run removes it when it ends."""
    from a2c.contracts.run_paths import RunPaths
    agent = agent_factory("quick", "echo hello\n")
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    ctx = _run(deep, agent, "30s")
    folders = RunPaths(ctx.run_dir).temp_socket_dirs()
    assert folders and folders[0].is_dir()          # the grader's socket lives there
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["status"] in ("finished", "no_submission"), summary
    assert not any(folder.exists() for folder in folders)
