"""The cgroup files the local backend's limits write, on a fake cgroupfs in tmp_path (both
versions), and what it says when a limit cannot be enforced (runtime/sandbox/cgroups.py). The
limits on real processes and real runs: test_cgroups.py."""

from __future__ import annotations

import errno
import pathlib

import pytest

from a2c.runtime.sandbox.cgroups import AgentCgroup, detect, own_paths, parse_size

V1 = ("memory", "cpu", "cpuacct", "pids", "freezer")
SELF_V1 = "8:pids:/\n4:memory:/outer/box\n2:cpu,cpuacct:/\n0::/\n"


def fake_v1(root: pathlib.Path, controllers=V1, memsw=True) -> pathlib.Path:
    for name in controllers:
        (root / name).mkdir(parents=True)
        (root / name / "cgroup.procs").write_text("")
    if "memory" in controllers:
        (root / "memory" / "outer" / "box").mkdir(parents=True)
        if memsw:
            (root / "memory" / "outer" / "box" / "memory.memsw.limit_in_bytes").write_text("")
    (root / "unified").mkdir()   # a hybrid host: the v2 mount holds no controller
    return root


def fake_v2(root: pathlib.Path, controllers="cpu memory pids") -> pathlib.Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("")
    (root / "cgroup.procs").write_text("1\n")
    (root / "a2c").mkdir()
    (root / "a2c" / "memory.swap.max").write_text("max\n")
    return root


def read(path: pathlib.Path) -> str:
    return path.read_text().strip()


def test_v1_writes_each_limit_in_its_controller_under_the_runtimes_own_cgroup(tmp_path):
    root = fake_v1(tmp_path / "cg")
    group = AgentCgroup.create("run-1", mem_limit="1g", cpus=0.5, pids=256, root=root,
                               self_cgroup=SELF_V1)
    assert group.version == "v1" and group.active
    memory = root / "memory" / "outer" / "box" / "a2c-run-1"
    assert group.dirs["memory"] == memory
    assert read(memory / "memory.limit_in_bytes") == str(1024 ** 3)
    assert read(memory / "memory.memsw.limit_in_bytes") == str(1024 ** 3)   # swap included
    assert read(root / "cpu" / "a2c-run-1" / "cpu.cfs_period_us") == "100000"
    assert read(root / "cpu" / "a2c-run-1" / "cpu.cfs_quota_us") == "50000"
    assert read(root / "pids" / "a2c-run-1" / "pids.max") == "256"
    assert (root / "cpuacct" / "a2c-run-1").is_dir() and (root / "freezer" / "a2c-run-1").is_dir()
    assert group.record() == {"memory": {"asked": "1g", "enforced": True},
                              "cpus": {"asked": 0.5, "enforced": True},
                              "pids": {"asked": 256, "enforced": True}, "cgroup": "v1"}
    assert group.warning() is None
    for folder in group.dirs.values():   # the kernel makes it in a real cgroupfs
        (folder / "cgroup.procs").write_text("")
    group.enter()   # the preexec_fn: "0" (the writer itself) into every controller's procs
    assert {read(d / "cgroup.procs") for d in group.dirs.values()} == {"0"}


def test_v1_without_swap_accounting_sets_the_memory_limit_only(tmp_path):
    root = fake_v1(tmp_path / "cg", memsw=False)
    group = AgentCgroup.create("r", mem_limit="512m", root=root, self_cgroup=SELF_V1)
    memory = group.dirs["memory"]
    assert read(memory / "memory.limit_in_bytes") == str(512 * 1024 ** 2)
    assert not (memory / "memory.memsw.limit_in_bytes").exists()


def test_v1_reads_oom_kills_and_cpu_usage(tmp_path):
    root = fake_v1(tmp_path / "cg")
    group = AgentCgroup.create("r", mem_limit="1g", root=root, self_cgroup=SELF_V1)
    memory = group.dirs["memory"]
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    assert group.oom_kills() == 0 and group.exit_cause() is None
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert group.oom_kills() == 3
    assert group.exit_cause() == ("out of memory: the agent reached its memory limit (1g) and "
                                  "the kernel killed it")
    # an older kernel without the counter: a failed charge says it
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    (memory / "memory.memsw.failcnt").write_text("12\n")
    assert group.oom_kills() == 1
    (group.dirs["cpuacct"] / "cpuacct.usage").write_text("2500000000\n")
    assert group.cpu_usage_s() == 2.5


def test_v1_a_controller_missing_is_said_for_its_limit_only(tmp_path):
    root = fake_v1(tmp_path / "cg", controllers=("memory", "cpu", "cpuacct"))
    group = AgentCgroup.create("r", mem_limit="1g", pids=256, root=root, self_cgroup=SELF_V1)
    record = group.record()
    assert record["memory"] == {"asked": "1g", "enforced": True}
    assert record["pids"] == {"asked": 256, "enforced": False,
                              "why": f"no pids controller mounted under {root}"}
    line = group.warning()
    assert "\n" not in line and "pids 256" in line and "no pids controller" in line
    assert "memory" not in line.split("(")[1].split(")")[0]


def test_v2_enables_the_controllers_and_writes_one_folder(tmp_path):
    root = fake_v2(tmp_path / "cg")
    group = AgentCgroup.create("run/2", mem_limit="1g", cpus=1.5, pids=64, root=root)
    folder = root / "a2c" / "run_2"
    assert group.version == "v2" and group.dirs == {"": folder}
    assert read(root / "cgroup.subtree_control") == "+cpu +memory +pids"
    assert read(root / "a2c" / "cgroup.subtree_control") == "+cpu +memory +pids"
    assert read(folder / "memory.max") == str(1024 ** 3)
    assert read(folder / "memory.swap.max") == "0"
    assert read(folder / "cpu.max") == "150000 100000"
    assert read(folder / "pids.max") == "64"
    assert group.warning() is None and group.record()["cgroup"] == "v2"
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
    assert "out of memory" in group.exit_cause()
    (folder / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n")
    assert group.cpu_usage_s() == 1.5
    (folder / "cgroup.procs").write_text("")
    group.enter()
    assert read(folder / "cgroup.procs") == "0"


def test_v2_a_missing_controller_is_said(tmp_path):
    root = fake_v2(tmp_path / "cg", controllers="cpu memory")
    group = AgentCgroup.create("r", mem_limit="1g", pids=64, root=root)
    assert read(root / "cgroup.subtree_control") == "+memory"
    assert group.record()["pids"]["enforced"] is False
    assert "pids controller is not available" in group.record()["pids"]["why"]
    assert group.record()["memory"]["enforced"] is True


def test_no_cgroup_filesystem_is_said_and_nothing_is_made(tmp_path):
    group = AgentCgroup.create("r", mem_limit="1g", cpus=0.5, pids=256, root=tmp_path / "none")
    assert not group.active
    assert all(group.record()[k]["enforced"] is False for k in ("memory", "cpus", "pids"))
    assert group.record()["memory"]["why"] == f"no cgroup filesystem at {tmp_path / 'none'}"
    assert group.record()["cgroup"] == "none"
    line = group.warning()
    assert line.startswith("WARNING: resource limits NOT enforced (memory 1g, cpus 0.5, pids 256)")
    assert "a2c doctor" in line and "\n" not in line
    assert group.close() == [] and group.kill() == 0


@pytest.mark.parametrize("code,words", [(errno.EACCES, "not root"),
                                        (errno.EROFS, "read-only"),
                                        (errno.EBUSY, "cannot be enabled")])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_cgroup_that_cannot_be_made_is_said_with_why(tmp_path, monkeypatch, code, words,
                                                       version):
    root = fake_v1(tmp_path / "cg") if version == "v1" else fake_v2(tmp_path / "cg")

    def refuse(self, *args, **kwargs):
        raise OSError(code, "refused", str(self))
    monkeypatch.setattr(pathlib.Path, "mkdir", refuse)
    group = AgentCgroup.create("r", mem_limit="1g", pids=256, root=root, self_cgroup=SELF_V1)
    assert not group.active
    for key in ("memory", "pids"):
        assert group.record()[key]["enforced"] is False and words in group.record()[key]["why"]
    assert words in group.warning()


def test_no_limit_asked_makes_no_cgroup(tmp_path):
    root = fake_v1(tmp_path / "cg")
    group = AgentCgroup.create("r", root=root, self_cgroup=SELF_V1)
    assert not group.active and group.record() == {} and group.warning() is None
    assert not (root / "pids" / "a2c-r").exists()


def test_detect_and_own_paths(tmp_path):
    assert detect(fake_v1(tmp_path / "a"))[0] == "v1"
    assert detect(fake_v2(tmp_path / "b"))[0] == "v2"
    assert detect(tmp_path / "c") == (None, f"no cgroup filesystem at {tmp_path / 'c'}")
    paths = own_paths(SELF_V1)
    assert paths["memory"] == "/outer/box" and paths["cpuacct"] == "/" and paths[""] == "/"


@pytest.mark.parametrize("text,size", [("1g", 1024 ** 3), ("512m", 512 * 1024 ** 2),
                                       ("64K", 65536), ("1024", 1024), ("2GB", 2 * 1024 ** 3)])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("bad", ["", "1.5g", "-1m", "lots", "1x"])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(bad)
