"""The one host-process layer (runtime/hostproc.py): a helper starts in its own session, is
ready when its probe says so, fails fast with its log when it exits, is killed when late, stops
as a group, and a stale one is stopped only when its command line still names it."""

from __future__ import annotations

import os
import sys
import time

import pytest

from a2c.runtime.hostproc import (
    HelperExited,
    HelperNotReady,
    HostProcess,
    file_ready,
    is_helper,
    pid_file_ready,
    stop_stale,
)
from a2c.runtime.sandbox.proctree import alive

READY = ("import json,os,sys,time; p=sys.argv[1]; open(p+'.tmp','w').write(json.dumps("
         "{'pid': os.getpid()})); os.rename(p+'.tmp', p); time.sleep(60)")


def test_ready_file_naming_its_pid(tmp_path):
    ready = tmp_path / "ready"
    ready.write_text('{"pid": 1}')                 # an earlier process's file does not count
    hp = HostProcess.spawn([sys.executable, "-c", READY, str(ready)], what="helper",
                           log=tmp_path / "logs" / "h.log")
    try:
        info = hp.wait_ready(pid_file_ready(ready, hp.pid), timeout=30)
        assert info == {"pid": hp.pid} and hp.alive()
        assert os.getpgid(hp.pid) == hp.pid != os.getpgid(0)     # its own session and group
    finally:
        assert hp.stop(5) is not None
    assert not hp.alive()


def test_exit_before_ready_says_so_with_the_log(tmp_path):
    hp = HostProcess.spawn([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
                           what="helper", log=tmp_path / "h.log")
    with pytest.raises(HelperExited, match="the helper exited with status 3:\nboom"):
        hp.wait_ready(file_ready(tmp_path / "never"), timeout=30)


def test_late_helper_is_killed(tmp_path):
    hp = HostProcess.spawn([sys.executable, "-c", "import time; time.sleep(60)"], what="helper")
    with pytest.raises(HelperNotReady, match="not ready within 0.3 s"):
        hp.wait_ready(lambda: None, timeout=0.3)
    assert not hp.alive()


def test_stop_takes_the_group_and_a_term_ignoring_child(tmp_path):
    script = ("trap '' TERM; sleep 60 & echo $! > child; wait")
    hp = HostProcess.spawn(["/bin/sh", "-c", script], what="shell", cwd=tmp_path)
    child = int(hp.wait_ready(file_ready(tmp_path / "child", lambda t: t.strip()), timeout=10))
    hp.stop(0.5)
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_stale_helper_only_when_its_command_line_names_the_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    ready = tmp_path / "ready"
    hp = HostProcess.spawn([sys.executable, "-c", READY, str(ready), "helper.mod", str(run)],
                           what="helper")
    pid_file = tmp_path / "helper.pid"
    hp.write_pid(pid_file)
    try:
        # Popen returns once exec has begun, before the kernel has set the new command line
        # (it reads empty for a moment); a stale helper is one that has long been running.
        hp.wait_ready(pid_file_ready(ready, hp.pid), timeout=30)
        assert is_helper(hp.pid, ["helper.mod", str(run)])
        assert not is_helper(hp.pid, ["helper.mod", str(run)[:-1]])   # RUN0 is not RUN
        assert not stop_stale(pid_file, ["helper.mod", str(tmp_path / "other")])
        assert hp.alive()
        assert stop_stale(pid_file, ["helper.mod", str(run)], grace=2)
        assert hp.proc.wait(5) is not None
    finally:
        hp.kill()
    assert not stop_stale(tmp_path / "missing.pid", ["x"])
