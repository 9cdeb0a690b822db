"""The disk budget's measure and watcher (runtime/sandbox/disk.py), the exit causes' names
(causes.py, cgroups.py, docker_container.py), and where the budget reaches each backend's
configuration. Fast: no sandbox (the attacks inside bubblewrap: tests/adversarial/
test_sandbox.py; real runs in both backends: test_disk_runs.py)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from a2c.runtime.sandbox import SandboxSpec, causes
from a2c.runtime.sandbox.disk import (
    DiskWatcher,
    format_size,
    measure,
    open_deleted,
    tmpfs_size,
    watched_parts,
)

MB = 1 << 20


def _write(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"x" * size)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def test_format_size_reads_like_the_spec():
    assert [format_size(n) for n in (512, 50 * MB, int(61.4 * MB), 3 * 1024 * MB,
                                     200 * 1024 * MB)] == ["512B", "50M", "61.4M", "3G", "200G"]


def test_measure_counts_blocks_once_and_follows_no_link(tmp_path):
    ws = tmp_path / "ws"
    _write(ws / "output" / "ckpt.bin", 3 * MB)
    _write(ws / "a" / "b" / "c" / "deep.bin", MB)
    os.link(ws / "output" / "ckpt.bin", ws / "hardlink.bin")         # the same blocks
    with open(ws / "sparse.bin", "wb") as handle:                     # 1 GB apparent, ~0 held
        handle.truncate(1 << 30)
    outside = _write(tmp_path / "outside" / "big.bin", 5 * MB)
    os.symlink(outside, ws / "link-out")                              # not followed
    os.symlink(outside.parent, ws / "dir-out")
    usage = measure({"workspace": [ws]})
    assert 4 * MB <= usage.bytes < 4 * MB + 256 * 1024, usage
    assert usage.files == 6 and usage.dirs == 4 and usage.unreadable == 0   # links: files


def test_parts_nested_in_another_are_walked_once(tmp_path):
    ws, tmp = tmp_path / "ws", tmp_path / "agent-tmp"
    _write(ws / ".home" / "cache.bin", 2 * MB)
    _write(tmp / "x.bin", MB)
    log = _write(tmp_path / "logs" / "agent.log", MB)
    parts = watched_parts(ws, tmp, ws / ".home", files=(log, None, ws / "inside.log"))
    assert parts == {"workspace": [ws], "/tmp": [tmp], "logs": [log]}
    usage = measure(parts)
    assert usage.parts["workspace"] >= 2 * MB and usage.parts["/tmp"] >= MB
    assert usage.parts["logs"] >= MB
    assert usage.words().startswith("workspace 2")


def test_a_file_held_open_after_its_unlink_counts(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    handle = open(ws / "hidden.bin", "wb")
    try:
        handle.write(b"x" * (4 * MB))
        handle.flush()
        os.fsync(handle.fileno())
        os.unlink(ws / "hidden.bin")
        usage = measure({"workspace": [ws]}, pids=[os.getpid()])
        assert usage.parts["open deleted files"] >= 4 * MB, usage
        # on another filesystem than the agent's folders (e.g. a memfd): not the disk's
        assert open_deleted([os.getpid()], {-1}, set()) == 0
    finally:
        handle.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any folder: nothing to open up")
def test_a_folder_the_agent_closed_is_opened_up_and_counted(tmp_path):
    ws = tmp_path / "ws"
    _write(ws / "locked" / "x.bin", 2 * MB)
    os.chmod(ws / "locked", 0)
    usage = measure({"workspace": [ws]})
    assert usage.bytes >= 2 * MB and usage.unreadable == 0


def test_the_watcher_stops_once_past_the_budget_and_says_why(tmp_path):
    ws = tmp_path / "ws"
    _write(ws / "a.bin", MB)
    stops = []
    watcher = DiskWatcher({"workspace": [ws]}, 3 * MB, lambda: stops.append(1) or {"ok": 1},
                          every=0.05, max_every=0.2)
    watcher.start()
    time.sleep(0.3)
    assert not watcher.fired.is_set() and watcher.scans >= 1
    _write(ws / "b.bin", 3 * MB)
    assert watcher.stopped.wait(5)
    assert stops == [1] and watcher.wait_stopped() == {"ok": 1}
    assert watcher.cause.startswith("disk budget exceeded: 4") and " of 3M (workspace " in \
        watcher.cause, watcher.cause
    assert watcher.record["exceeded"] == watcher.cause and watcher.record["asked"] == "3M"
    watcher.fire(watcher.last)                # once only
    assert stops == [1]


def test_a_cancelled_watcher_never_stops_and_a_finished_one_records_the_end(tmp_path):
    ws = tmp_path / "ws"
    _write(ws / "a.bin", MB)
    watcher = DiskWatcher({"workspace": [ws]}, 10 * MB, lambda: pytest.fail("stopped"),
                          every=0.05, max_every=0.1).start()
    _write(ws / "b.bin", 2 * MB)
    watcher.finish()
    assert watcher.record["used_at_end"].startswith("3") and watcher.wait_stopped() is None
    _write(ws / "c.bin", 20 * MB)
    time.sleep(0.3)
    assert not watcher.fired.is_set()


def test_the_next_scan_waits_as_long_as_the_room_allows():
    from a2c.runtime.sandbox.disk import ASSUMED_RATE, EVERY_S, MAX_EVERY_S, Usage
    watcher = DiskWatcher({}, 200 * 1024 * MB, lambda: {})
    assert watcher.next_wait(Usage(bytes=0), ASSUMED_RATE) == MAX_EVERY_S      # far below
    assert watcher.next_wait(Usage(bytes=200 * 1024 * MB - MB), ASSUMED_RATE) == EVERY_S
    room = 5 * ASSUMED_RATE                                                   # 5 s of writing
    assert watcher.next_wait(Usage(bytes=200 * 1024 * MB - room), ASSUMED_RATE) == 5.0


def test_a_burst_faster_than_assumed_is_caught_between_scans(tmp_path):
    """The filesystem's used space rising by the room left brings the scan forward."""
    ws = tmp_path / "ws"
    ws.mkdir()
    watcher = DiskWatcher({"workspace": [ws]}, 8 * MB, lambda: {}, every=0.1, max_every=60,
                          rate=1.0)      # assumed 1 byte/s: the next scan would be 60 s away
    watcher.start()
    time.sleep(0.3)
    _write(ws / "burst.bin", 32 * MB)
    assert watcher.stopped.wait(5), watcher.record


def test_tmpfs_sizes():
    assert tmpfs_size(50 * MB) == 50 * MB
    assert tmpfs_size(200 * 1024 * MB) == 8 * 1024 * MB and tmpfs_size(None) == 8 * 1024 * MB


# ------------------------------------------------------------------------------- exit causes
@pytest.mark.parametrize("rc, oom, refusals, words", [
    (137, 1, 0, "out of memory"),          # the OOM killer's SIGKILL
    (1, 1, 0, "out of memory"),            # a child killed for memory, then the agent gave up
    (137, 1, 5, "out of memory"),          # both counted: a SIGKILL is the OOM killer's
    (1, 1, 5, "process limit reached"),    # both counted: any other end is the fork's
    (1, 0, 3, "process limit reached"),    # the fork failure once reported as out of memory
    (254, 0, 1, "process limit reached"),
    (-9, 0, 0, "killed by signal 9"),
    (143, 0, 0, "killed by signal 15"),
    (1, 0, 0, None),
    (0, 0, 0, None),
    (255, 0, 0, None),
])
def test_causes_are_named_by_what_happened(rc, oom, refusals, words):
    cause = causes.name(rc, oom_kills=oom, pid_refusals=refusals, mem_limit="1g",
                        pids_limit=256)
    assert (cause is None) if words is None else cause.startswith(words), cause
    if words == "process limit reached":
        assert "(256)" in cause and "memory" not in cause


def test_a_failed_charge_alone_is_oom_only_with_a_sigkill():
    """Kernels before 4.13 count no OOM kill: memory.failcnt (a charge that hit the limit) is
    believed only when the agent was SIGKILLed."""
    assert causes.name(1, oom_kills=1, oom_exact=False) is None
    assert causes.name(137, oom_kills=1, oom_exact=False).startswith("out of memory")


def test_cgroup_names_a_refused_fork_from_pids_events(tmp_path):
    from test_cgroups_files import SELF_V1, fake_v1, fake_v2

    from a2c.runtime.sandbox.cgroups import AgentCgroup
    group = AgentCgroup.create("r", mem_limit="512m", pids=64, root=fake_v1(tmp_path / "v1"),
                               self_cgroup=SELF_V1)
    (group.dirs["pids"] / "pids.events").write_text("max 7\n")
    (group.dirs["memory"] / "memory.oom_control").write_text("oom_kill 0\n")
    assert group.pid_refusals() == 7
    assert group.exit_cause(1).startswith("process limit reached: ")
    assert "(64)" in group.exit_cause(1) and "7 times" in group.exit_cause(1)
    (group.dirs["memory"] / "memory.oom_control").write_text("oom_kill 1\n")
    assert group.exit_cause(137).startswith("out of memory")
    v2 = AgentCgroup.create("r2", mem_limit="1g", pids=64, root=fake_v2(tmp_path / "v2"))
    folder = v2.dirs[""]
    (folder / "pids.events").write_text("max 2\n")
    assert v2.exit_cause(2).startswith("process limit reached")
    assert v2.exit_cause(0).startswith("process limit reached")   # the kernel's count stands


def test_a_counter_left_from_before_the_start_is_not_the_agents(tmp_path):
    from test_cgroups_files import SELF_V1, fake_v1

    from a2c.runtime.sandbox.cgroups import AgentCgroup
    root = fake_v1(tmp_path / "v1")
    left = root / "pids" / "a2c-r"
    left.mkdir()
    (left / "pids.events").write_text("max 9\n")      # a folder a crashed run left
    group = AgentCgroup.create("r", pids=64, root=root, self_cgroup=SELF_V1)
    assert group.exit_cause(1) is None
    (left / "pids.events").write_text("max 10\n")
    assert "1 time)" in group.exit_cause(1)


def test_docker_names_a_refused_fork_it_read_while_the_container_ran():
    from a2c.runtime.sandbox.docker_container import exit_cause
    assert exit_cause({"ExitCode": 1}, "512m", 3, 64).startswith("process limit reached")
    assert exit_cause({"ExitCode": 137, "OOMKilled": True}, "512m", 3, 64).startswith(
        "out of memory: the container reached its memory limit (512m)")
    assert exit_cause({"ExitCode": 1}, "512m", 0, 64) is None


def test_end_status_of_a_disk_stop_is_agent_failed():
    from a2c.contracts.run_info import AgentExit, RunStatus
    from a2c.runtime.run.ending import end_status
    assert end_status(AgentExit(-15, "disk_budget"), 3) == RunStatus.AGENT_FAILED
    assert end_status(AgentExit(-15, "deadline"), 3) == RunStatus.FINISHED


# ------------------------------------------------------------------------ the configuration
def _spec(tmp_path: Path, **kw) -> SandboxSpec:
    return SandboxSpec(command=["bash", "x"], workspace=tmp_path / "w", data_dir=tmp_path / "d",
                       model_dir=tmp_path / "m", socket_path=tmp_path / "g.sock",
                       log_path=tmp_path / "agent.log", command_log=tmp_path / "commands.log",
                       marker="m", **kw)


def test_a_tmpfs_tmp_is_bounded_by_the_budget_in_both_backends(tmp_path):
    from a2c.runtime.sandbox.docker_container import container_kwargs
    from a2c.runtime.sandbox.local import build_bwrap_argv
    from a2c.runtime.sandbox.privileges import AgentIds
    spec = _spec(tmp_path, disk_limit="50m")
    argv = build_bwrap_argv(spec, python_dirs=[], tmp_size=True)
    at = argv.index("/tmp")
    assert argv[at - 1] == "--tmpfs" and argv[at - 3:at - 1] == ["--size", str(50 * MB)]
    assert "--size" not in build_bwrap_argv(spec, python_dirs=[], tmp_size=False)
    kw = container_kwargs(spec, "img", AgentIds(1000, 1000))
    assert kw["tmpfs"] == {"/tmp": f"rw,exec,size={50 * MB}"}
    big = container_kwargs(_spec(tmp_path, disk_limit="204800m"), "img", AgentIds(1000, 1000))
    assert big["tmpfs"] == {"/tmp": f"rw,exec,size={8 << 30}"}       # memory: at most 8g
    with_tmp = _spec(tmp_path, disk_limit="50m", agent_tmp=tmp_path / "agent-tmp")
    assert "--size" not in build_bwrap_argv(with_tmp, python_dirs=[], tmp_size=True)


def test_bubblewrap_says_whether_it_takes_size():
    from a2c.runtime.sandbox.bwrap import bwrap_path, size_works
    if not bwrap_path():
        pytest.skip("no bubblewrap here")
    assert isinstance(size_works(), bool)


def test_budget_disk_is_a_typed_field_with_a_default():
    from a2c.contracts.spec import DEFAULT_DISK_MB, BudgetSpec
    assert BudgetSpec.from_dict({}).disk_budget_mb == DEFAULT_DISK_MB == 200 * 1024
    assert BudgetSpec.from_dict({"disk_mb": 50}).disk_budget_mb == 50
    assert "disk_mb" not in BudgetSpec.from_dict({"wall_clock_s": 60}).to_dict()   # digests


def test_a_spec_with_a_bad_disk_size_is_refused(tmp_path):
    import json

    import jsonschema

    from a2c.paths import project_root
    schema = json.loads((project_root() / "compiler" / "schemas" /
                         "task.schema.json").read_text())
    disk = schema["properties"]["budget"]["properties"]["disk"]
    for good in ("20G", "500M", "1t", "2048k"):
        jsonschema.validate(good, disk)
    for bad in ("20GB", "0G", "-5G", "1.5G", 20):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, disk)


def test_local_process_waits_for_the_watchers_stop_before_saying_it_ended(tmp_path):
    """poll() returns the leader's code only once the whole tree is stopped."""
    from a2c.runtime.sandbox.local import LocalProcess

    class Popen:
        pid, returncode = 123456789, None

        def poll(self):
            return self.returncode

    proc = LocalProcess(Popen(), "m", None)
    release = threading.Event()
    proc.disk = DiskWatcher({}, 1, lambda: release.wait(5) and {"survivors": []})
    proc.disk._thread = threading.Thread(target=lambda: None)   # fired from this test
    threading.Thread(target=proc.disk.fire, args=(measure({}),), daemon=True).start()
    assert proc.disk.fired.wait(2)
    proc.popen.returncode = -15
    threading.Timer(0.3, release.set).start()
    start = time.monotonic()
    assert proc.poll() == -15 and time.monotonic() - start >= 0.2
    assert proc.stopped_for == "disk_budget" and proc.stop_report == {"survivors": []}
