"""`a2c doctor` and the pre-flight of `a2c run` / `a2c sweep` (runtime/preflight.py,
a2c/cli/doctor.py): the table here, and with bubblewrap, docker, cgroups, GPUs, the record key or
Ray made unavailable, one clear row each with its fix command."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import sys

import pytest

from a2c.cli.main import main
from a2c.errors import RunError
from a2c.runtime import preflight
from a2c.runtime.preflight import MISSING, OK, WARN, Check, isolation

ROWS = ("python and training stack", "bubblewrap", "cores and memory", "disk",
        "model smollm2-135m-instruct", "record key", "cgroup limits", "GPUs", "docker engine",
        "docker NVIDIA runtime", "node", "Ray", "A2C_* variables")
REQUIRED = ("python and training stack", "cores and memory", "disk",
            "model smollm2-135m-instruct", "record key")


def _required(name: str) -> bool:
    """The demo's rows; bubblewrap unprivileged only for a runtime that is not root."""
    if name == "bubblewrap (unprivileged)":
        return os.geteuid() != 0
    return name in REQUIRED or name.startswith("bubblewrap")


def _doctor_json(capsys) -> tuple[int, dict]:
    rc = main(["doctor", "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _row(rows, name) -> dict:
    found = [r for r in rows if r["name"] == name]
    assert len(found) == 1, (name, rows)
    return found[0]


def test_doctor_here_has_every_row_and_a_fix_for_each_that_is_not_ok(capsys):
    rc, out = _doctor_json(capsys)
    rows = out["checks"]
    names = [r["name"] for r in rows]
    for name in ROWS:
        assert any(n.startswith(name) for n in names), (name, names)
    assert any(n.startswith("model ") for n in names)
    for row in rows:
        assert row["status"] in (OK, WARN, MISSING)
        assert row["detail"]
        assert (row["fix"] is None) == (row["status"] == OK), row
        assert row["required"] == _required(row["name"]), row
    required_missing = [r["name"] for r in rows if r["required"] and r["status"] == MISSING]
    optional = [r["name"] for r in rows if not r["required"] and r["status"] != OK]
    assert out["required_missing"] == required_missing and out["optional_missing"] == optional
    assert out["ready_for_demo"] == (not required_missing)
    assert rc == out["exit"] == (1 if required_missing else 3 if optional else 0)
    assert out["ok"] == (rc == 0)
    # the required rows come first
    flags = [r["required"] for r in rows]
    assert flags == sorted(flags, reverse=True)
    print("\n".join(f"{r['status']:8} {r['name']}: {r['detail']}" for r in rows))


def test_doctor_table_prints_each_row(capsys, monkeypatch):
    monkeypatch.setattr(preflight, "all_checks", lambda *a, **k: [
        Check("bubblewrap", MISSING, "bwrap is not on the PATH", "apt-get install bubblewrap",
              required=True),
        Check("Ray", OK, "ray 2.60.0")])
    rc = main(["doctor"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "missing  required  bubblewrap: bwrap is not on the PATH" in out
    assert "\n                   fix: apt-get install bubblewrap\n" in out
    assert "ok       optional  Ray: ray 2.60.0" in out
    assert "NOT ready for the demo: missing bubblewrap (exit 1)" in out


def test_without_bubblewrap_on_the_path_one_row_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    rows = preflight.bubblewrap_checks()
    assert rows == [Check("bubblewrap", MISSING, "bwrap is not on the PATH: the local backend "
                          "runs the agent unconfined (refused as root)",
                          "apt-get install bubblewrap", required=True)]


def test_doctor_without_bubblewrap_shows_the_row(monkeypatch, capsys):
    monkeypatch.setenv("A2C_NO_BWRAP", "1")   # bwrap_path() finds none
    rc, out = _doctor_json(capsys)
    row = _row(out["checks"], "bubblewrap")
    assert row["status"] == MISSING and row["fix"] == "apt-get install bubblewrap"
    assert row["required"] is True
    assert rc == 1 and out["ok"] is False and out["ready_for_demo"] is False
    assert "bubblewrap" in out["required_missing"]


def test_bubblewrap_that_cannot_make_namespaces(monkeypatch):
    monkeypatch.setattr("a2c.runtime.sandbox.local.bwrap_path", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(isolation, "run_probe", lambda argv: (False, "Operation not permitted"))
    monkeypatch.setattr(isolation, "_userns_fix",
                        lambda: "sysctl -w kernel.unprivileged_userns_clone=1")
    root, unprivileged = preflight.bubblewrap_checks(root=True)
    assert root.status == MISSING and "Operation not permitted" in root.detail and root.fix
    assert root.required and not unprivileged.required   # a root runtime: nesting is optional
    assert unprivileged.name == "bubblewrap (unprivileged)" and unprivileged.status == WARN
    assert unprivileged.fix == "sysctl -w kernel.unprivileged_userns_clone=1"
    # a runtime that is not root needs the unprivileged one
    (row,) = preflight.bubblewrap_checks(root=False)
    assert row.status == MISSING and "no unprivileged user namespaces" in row.detail
    assert row.required


@pytest.mark.parametrize("message,fix", [
    ("docker backend: no Docker engine is reachable (Connection refused); start dockerd "
     "(bash scripts/docker_engine.sh) or use --backend local", "bash scripts/docker_engine.sh"),
    ("docker backend: the docker SDK is not installed (pip install 'a2c[docker]')",
     "pip install 'a2c[docker]'")])
def test_without_a_docker_engine_one_row_with_its_fix(monkeypatch, capsys, message, fix):
    def refuse():
        raise RunError(message)
    monkeypatch.setattr("a2c.runtime.sandbox.docker_engine.client", refuse)
    rc, out = _doctor_json(capsys)
    engine = _row(out["checks"], "docker engine")
    assert engine["status"] == MISSING and engine["fix"] == fix
    assert "docker backend:" not in engine["detail"]
    assert _row(out["checks"], "docker NVIDIA runtime")["status"] == MISSING
    assert engine["required"] is False and "docker engine" in out["optional_missing"]
    assert rc == out["exit"] and rc in (1, 3)   # optional: 1 only if a required row is missing
    assert (rc == 1) == bool(out["required_missing"])


def test_docker_engine_without_the_nvidia_runtime(monkeypatch):
    class Engine:
        def info(self):
            return {"ServerVersion": "27.1", "Driver": "overlay2", "CgroupVersion": "2",
                    "Runtimes": {"runc": {}}}

        def close(self):
            pass
    monkeypatch.setattr("a2c.runtime.sandbox.docker_engine.client", Engine)
    engine, nvidia = preflight.docker_checks()
    assert engine.ok and "27.1" in engine.detail
    assert nvidia.status == WARN and "nvidia-ctk runtime configure" in nvidia.fix
    monkeypatch.setattr(Engine, "info", lambda self: {"Runtimes": {"nvidia": {}, "runc": {}}})
    assert preflight.docker_checks()[1].ok


def test_no_cgroup_filesystem_is_one_missing_row(tmp_path):
    row = preflight.cgroup_check(root=tmp_path / "nothing")
    assert row.status == MISSING and "no cgroup filesystem" in row.detail
    assert row.fix == "mount -t cgroup2 none /sys/fs/cgroup"


def test_a_missing_controller_is_a_warning_with_the_mount_that_fixes_it(tmp_path):
    root = tmp_path / "cg"
    for name in ("memory", "cpu", "cpuacct"):
        (root / name).mkdir(parents=True)
        (root / name / "cgroup.procs").write_text("")
    row = preflight.cgroup_check(root=root)
    assert row.status == WARN and "pids NOT enforced" in row.detail
    assert "memory, cpus enforced" in row.detail
    assert row.fix.startswith("mkdir -p /sys/fs/cgroup/pids && mount -t cgroup -o pids")
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    (v2 / "cgroup.subtree_control").write_text("")
    row = preflight.cgroup_check(root=v2)
    assert row.status == WARN and row.fix == "echo +pids > /sys/fs/cgroup/cgroup.subtree_control"


@pytest.mark.parametrize("code,fix", [(errno.EACCES, "run a2c as root"),
                                      (errno.EROFS, "mount -o remount,rw /sys/fs/cgroup")])
def test_a_cgroup_that_cannot_be_made(tmp_path, monkeypatch, code, fix):
    root = tmp_path / "cg"
    for name in ("memory", "cpu", "pids"):
        (root / name).mkdir(parents=True)
        (root / name / "cgroup.procs").write_text("")

    def refuse(self, *args, **kwargs):
        raise OSError(code, "refused", str(self))
    monkeypatch.setattr(pathlib.Path, "mkdir", refuse)
    row = preflight.cgroup_check(root=root)
    assert row.status == MISSING and row.fix.startswith(fix)


def test_doctor_with_a_fake_cgroup_root(monkeypatch, capsys, tmp_path):
    real = preflight.cgroup_check
    monkeypatch.setattr(preflight, "cgroup_check", lambda root=None: real(tmp_path / "none"))
    _, out = _doctor_json(capsys)
    row = _row(out["checks"], "cgroup limits")
    assert row["status"] == MISSING and row["fix"] == "mount -t cgroup2 none /sys/fs/cgroup"


def test_gpus(monkeypatch, tmp_path):
    row = preflight.gpu_check(dev=tmp_path)
    assert row.status == WARN and "CPU-only" in row.detail and "NVIDIA driver" in row.fix
    monkeypatch.setattr(isolation, "_gpu_nodes",
                        lambda dev: [("/dev/nvidia0", "NVIDIA H200"), ("/dev/nvidia1", None)])
    monkeypatch.setattr(isolation, "_driver_version", lambda: None)
    row = preflight.gpu_check()
    assert row.status == WARN and "no driver loaded" in row.detail and "modprobe" in row.fix
    monkeypatch.setattr(isolation, "_driver_version", lambda: "550.54.15")
    row = preflight.gpu_check()
    assert row.ok and row.detail == ("2 GPU(s) (/dev/nvidia0, /dev/nvidia1), NVIDIA H200, "
                                     "driver 550.54.15")


def test_record_key_missing_open_and_private(monkeypatch, tmp_path):
    key = tmp_path / "record.ed25519"
    monkeypatch.setenv("A2C_RECORD_SIGNING_KEY", str(key))
    row = preflight.record_key_check()
    assert row.status == WARN and str(key) in row.detail and row.fix == "a2c keys --init"
    assert row.required   # a run signs its record with it (and refuses an open one)
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)
    row = preflight.record_key_check()
    assert row.status == MISSING and "644" in row.detail and row.fix == f"chmod 600 {key}"
    key.chmod(0o600)
    row = preflight.record_key_check()
    assert row.ok and "mode 600" in row.detail


def test_scaffolds_found_or_not(tmp_path, monkeypatch):
    (tmp_path / "found-cli").write_text("#!/bin/sh\n")
    (tmp_path / "found-cli").chmod(0o755)
    agents = [{"id": "a", "type": "cli", "launch": {"check": "found-cli --version"}},
              {"id": "b", "type": "cli", "launch": {"check": "absent-cli --version"}},
              {"id": "ref", "type": "reference"}]
    commands = {"a": "found-cli", "b": "absent-cli"}
    monkeypatch.setattr("a2c.runtime.run.scaffold.check_command",
                        lambda agent: commands[agent.id])
    rows = preflight.scaffold_checks(agents, search_path=str(tmp_path))
    assert [(r.name, r.status) for r in rows] == [("scaffold a", OK), ("scaffold b", MISSING)]
    assert rows[1].fix == "a2c agents install b"   # no install entry needs anything absent
    assert not any(r.required for r in rows)


def test_without_ray_the_sweep_stops_with_the_install_command(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)   # import ray -> ImportError
    row = preflight.ray_check()
    assert row == Check("Ray", MISSING, "not installed: a2c sweep cannot run",
                        "pip install 'a2c[sweep]'")
    rc = main(["sweep", "no-such-suite"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "pre-flight: Ray: not installed" in err and "pip install 'a2c[sweep]'" in err


def test_run_preflight_stops_a_docker_run_without_an_engine(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(preflight, "run_checks", lambda backend, use_bwrap=None: [
        Check("docker engine", MISSING, "no Docker engine is reachable (refused)",
              "bash scripts/docker_engine.sh")])
    rc = main(["run", "arith", "--agent", "ref-sft", "--backend", "docker",
               "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and "pre-flight: docker engine" in err
    assert "(fix: bash scripts/docker_engine.sh)" in err
    assert not (tmp_path / "runs").exists()


def test_run_preflight_warns_and_goes_on():
    lines = []
    from a2c.cli.doctor import preflight as run_preflight
    run_preflight([Check("bubblewrap", MISSING, "bwrap is not on the PATH", "apt-get install "
                         "bubblewrap"), Check("cgroup limits", OK, "v1")], lines.append,
                  fatal=("docker engine",))
    assert lines == ["pre-flight: bubblewrap: bwrap is not on the PATH (fix: apt-get install "
                     "bubblewrap)"]


def test_run_checks_pick_the_backends_rows(monkeypatch):
    monkeypatch.setattr(preflight, "bubblewrap_checks", lambda: [Check("bubblewrap", OK, "x")])
    monkeypatch.setattr(preflight, "cgroup_check", lambda: Check("cgroup limits", OK, "v1"))
    monkeypatch.setattr(preflight, "docker_checks", lambda: [Check("docker engine", OK, "27"),
                                                             Check("docker NVIDIA runtime", OK,
                                                                   "nvidia")])
    monkeypatch.setattr(preflight, "environment_check", lambda: Check("A2C_* variables", OK, "x"))
    assert [c.name for c in preflight.run_checks("local")] == ["bubblewrap", "cgroup limits",
                                                             "A2C_* variables"]
    assert [c.name for c in preflight.run_checks("local", False)] == ["cgroup limits",
                                                                    "A2C_* variables"]
    assert [c.name for c in preflight.run_checks("docker")] == ["docker engine",
                                                              "A2C_* variables"]


# names a2c does not read, spelt apart so the settings test does not take them for switches
STALE_KNOB, TYPO = "A2C_" + "REF_STEPS", "A2C_" + "CACHEE"


def test_an_a2c_variable_nobody_reads_is_a_warning_that_names_it():
    env = {"A2C_CACHE": "/x", "A2C_SERVICE_URL_SHOP": "http://127.0.0.1:1", STALE_KNOB: "3",
           TYPO: "/y", "PATH": "/bin"}
    row = preflight.environment_check(env)
    assert row.status == WARN and row.fix == f"unset {TYPO} {STALE_KNOB}"
    assert row.detail.startswith(f"{TYPO}, {STALE_KNOB}: set, but a2c reads no such")
    assert "a2c agents params ID" in row.detail
    assert preflight.environment_check({"A2C_CACHE": "/x"}).ok


def test_run_preflight_names_an_unread_variable_and_goes_on(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(STALE_KNOB, "3")
    monkeypatch.setattr("a2c.cli.run.prepare_from_refs", lambda *a, **k: (_ for _ in ()).throw(
        RunError("stopped after the pre-flight")))
    rc = main(["run", "arith", "--agent", "ref-sft", "--runs-dir", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    assert rc != 0 and "stopped after the pre-flight" in err
    assert f"pre-flight: A2C_* variables: {STALE_KNOB}: set, but a2c reads no such" in out
