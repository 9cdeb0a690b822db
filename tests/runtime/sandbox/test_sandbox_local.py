"""Sandbox backends: the process tree dies at the deadline; inside bubblewrap the agent cannot
see the held-out data, the grader's token or the run record."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from scripted_agents import PROBE_IO

from a2c.runtime.sandbox import SandboxSpec, get_backend
from a2c.runtime.sandbox.local import LocalBackend, build_bwrap_argv, bwrap_works
from a2c.runtime.sandbox.proctree import alive, collect

HAVE_BWRAP = bwrap_works()

# A tree: child, grandchild, and a setsid'ed double-fork escapee whose parent exits at once.
FORKER = r"""
set -u
sleep 300 &
( sleep 300 & sleep 300 ) &
setsid sh -c 'sleep 300 & echo $! >> pids; sleep 300' &
( setsid sleep 301 & ) &
trap '' TERM
echo started > started
wait
"""


def _spec(tmp_path: Path, command: list[str], marker: str = "m1") -> SandboxSpec:
    run = tmp_path / "run"
    for name in ("workspace", "data", "model", "grader", "logs"):
        (run / name).mkdir(parents=True, exist_ok=True)
    (run / "data" / "train.jsonl").write_text('{"id": "1"}\n')
    (run / "model" / "config.json").write_text("{}")
    (run / "grader" / "token").write_text("secret-token")
    (run / "grader" / "heldout.jsonl").write_text('{"id": "h1", "answer": "42"}\n')
    (run / "events.jsonl").write_text("")
    sock = run / "grader" / "grader.sock"
    sock.write_text("")  # stands in for the socket: a bind of a plain file works the same way
    return SandboxSpec(command=command, workspace=run / "workspace", data_dir=run / "data",
                       model_dir=run / "model", socket_path=sock,
                       log_path=run / "logs" / "agent.log",
                       command_log=run / "logs" / "commands.log", env={"A2C_TASK_ID": "t"},
                       marker=marker)


@pytest.mark.parametrize("use_bwrap", [False, pytest.param(True, marks=pytest.mark.skipif(
    not HAVE_BWRAP, reason="bubblewrap not available"))])
def test_tree_of_sleepers_is_stopped_within_5s(tmp_path, use_bwrap, monkeypatch):
    if not use_bwrap:  # as root, the unconfined backend is refused unless explicitly allowed
        monkeypatch.setenv("A2C_UNSAFE_ROOT_AGENT", "1")
    marker = f"tree-{use_bwrap}-{os.getpid()}"
    spec = _spec(tmp_path, ["sh", "-c", FORKER], marker=marker)
    proc = LocalBackend(use_bwrap=use_bwrap).start(spec)
    for _ in range(200):
        if (spec.workspace / "started").exists():
            break
        time.sleep(0.05)
    time.sleep(0.5)
    before = collect(proc.pid, proc.pgid, marker)
    assert len(before) >= 7, before  # sh, sleeps, subshells, setsid'ed ones
    start = time.monotonic()
    report = proc.stop(grace=2.0)
    elapsed = time.monotonic() - start
    assert elapsed < 5.0
    assert report["survivors"] == []
    assert not any(alive(pid) for pid in before)
    assert collect(None, None, marker) == set()
    assert proc.returncode is not None


def test_without_bwrap_isolation_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("A2C_UNSAFE_ROOT_AGENT", "1")
    backend = LocalBackend(use_bwrap=False)
    assert backend.isolation == "none"
    assert "UNCONFINED" in backend.warning()


def test_bwrap_argv_binds_only_what_it_should(tmp_path):
    spec = _spec(tmp_path, ["python", "agent.py"])
    argv = build_bwrap_argv(spec, "bwrap", python_dirs=["/opt/py"])
    joined = " ".join(argv)
    assert f"--ro-bind {spec.data_dir} /data" in joined
    assert f"--ro-bind {spec.model_dir} /model" in joined
    assert f"--bind {spec.workspace} /workspace" in joined
    assert f"--bind {spec.socket_path} /run/a2c/grader.sock" in joined
    assert "--unshare-all" in argv and "--die-with-parent" in argv and "--new-session" in argv
    run_root = str(spec.workspace.parent)
    sources = [argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind")]
    for src in sources:  # nothing of the run dir except the four allowed paths
        if src.startswith(run_root):
            assert src in {str(spec.data_dir), str(spec.model_dir), str(spec.workspace),
                           str(spec.socket_path), str(spec.command_log)}
    assert argv[-2:] == ["python", "agent.py"]


PROBE = r"""
import json, os, sys
run = sys.argv[1]
report = {}
%PROBE_IO%
report["token"] = tryread(run + "/grader/token")
report["heldout"] = tryread(run + "/grader/heldout.jsonl")
report["events_write"] = trywrite(run + "/events.jsonl")
report["data_read"] = tryread("/data/train.jsonl")
report["data_write"] = trywrite("/data/train.jsonl")
report["model_write"] = trywrite("/model/config.json")
report["run_listing"] = sorted(os.listdir(os.path.dirname(run))) if os.path.exists(os.path.dirname(run)) else "absent"
report["env_token_file"] = [k for k in os.environ if "A2C" in k]
report["workspace_write"] = trywrite("/workspace/ok.txt")
report["net"] = sorted(os.listdir("/sys/class/net")) if os.path.exists("/sys/class/net") else "no sys"
open("/workspace/probe.json", "w").write(json.dumps(report))
""".replace("%PROBE_IO%", PROBE_IO.strip())


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not available")
def test_agent_in_bwrap_cannot_read_heldout_or_token_nor_write_record(tmp_path):
    probe = tmp_path / "run" / "workspace" / "probe.py"
    spec = _spec(tmp_path, [])
    probe.write_text(PROBE)
    run = spec.workspace.parent
    spec.command = [sys.executable, "/workspace/probe.py", str(run)]
    proc = get_backend("local").start(spec)
    assert proc.wait(60) == 0, (spec.log_path.read_text())
    proc.close()
    report = json.loads((spec.workspace / "probe.json").read_text())
    assert report["token"].startswith("ERR"), report
    assert report["heldout"].startswith("ERR"), report
    assert report["events_write"].startswith("ERR"), report
    assert (run / "events.jsonl").read_text() == ""
    assert report["data_read"].startswith('READ {"id"')
    assert report["data_write"].startswith("ERR") and report["model_write"].startswith("ERR")
    assert report["workspace_write"] == "WROTE"
    assert (run / "grader" / "token").read_text() == "secret-token"


def test_unknown_backend():
    from a2c.errors import RunError
    with pytest.raises(RunError):
        get_backend("vm")


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not usable here")
def test_python_dirs_under_tmp_stay_visible(tmp_path):
    """A checkout or venv under /tmp (as in a CI clone) is not hidden by the sandbox's fresh /tmp."""
    import shutil
    import subprocess

    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "marker.txt").write_text("visible\n")
    spec = _spec(tmp_path, ["/bin/cat", str(venv / "marker.txt")])
    spec.command_log.touch()
    argv = build_bwrap_argv(spec, shutil.which("bwrap"), python_dirs=[str(tmp_path / "venv")])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0 and proc.stdout == "visible\n", proc.stderr
    # ...while the rest of the host's /tmp (here: the run's grader files) stays invisible.
    secret = tmp_path / "secret.txt"
    secret.write_text("token\n")
    spec = _spec(tmp_path, ["/bin/cat", str(secret)])
    spec.command_log.touch()
    argv = build_bwrap_argv(spec, shutil.which("bwrap"), python_dirs=[str(tmp_path / "venv")])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode != 0 and "token" not in proc.stdout


def test_python_binds_follow_the_packaging(tmp_path):
    """The a2c code an agent imports is visible inside the sandbox, editable install or wheel:
    its staged allow-list, bound where the a2c packages load from (view.agent_view); the rest
    (specs with held-out JSONL files, compiler, templates, analysis, the driver gateway) is not
    bound, or is covered where a bound folder holds it (issue 12; issue 26: an allow-list)."""
    import importlib

    from a2c.runtime.sandbox import view
    from a2c.runtime.sandbox.local import SYSTEM_DIRS, python_binds
    binds = [Path(p) for p in python_binds()]
    shown = view.agent_view(list(SYSTEM_DIRS) + [str(b) for b in binds],
                            view.stage(tmp_path / "agent-lib"))

    def under(path: Path, top) -> bool:
        return path == Path(top) or Path(top) in path.parents

    def visible(folder: Path) -> bool:
        for staged, inside in sorted(shown.binds, key=lambda b: -len(b[1])):
            if under(folder, inside):   # shown from the staged copy, where it holds it
                return (Path(staged) / folder.relative_to(inside)).is_dir()
        if any(under(folder, h) for h in shown.empty_dirs):
            return False
        return any(under(folder, b) for b in [*binds, *SYSTEM_DIRS])

    for name in ("a2c", "a2c.runtime", "a2c.agents.reference", "a2c.runtime.envs"):
        for entry in importlib.import_module(name).__path__:
            assert visible(Path(entry).resolve()), (name, entry)
    for name in ("a2c.compiler", "a2c.analysis", "a2c.templates", "a2c.specs",
                 "a2c.runtime.driver_gateway", "a2c.agents.scripted_driver"):
        for entry in importlib.import_module(name).__path__:
            assert not visible(Path(entry).resolve()), (name, entry)


def test_python_binds_read_the_editable_hook(monkeypatch, tmp_path):
    """An editable install's import hook says where an agent package loads from (hatch_build.py):
    the staged view of that package is bound there, not the checkout's folder itself."""
    import types

    from a2c.runtime.sandbox import view
    from a2c.runtime.sandbox.local import python_binds
    extra = tmp_path / "checkout" / "newpkg"
    extra.mkdir(parents=True)
    hook = types.ModuleType("_a2c_editable")
    hook.MAPPING = {"a2c.runtime": str(extra)}
    monkeypatch.setitem(sys.modules, "_a2c_editable", hook)
    staged = tmp_path / "agent-lib"
    (staged / "a2c" / "runtime").mkdir(parents=True)
    assert (str(staged / "a2c" / "runtime"), str(extra.resolve())) in \
        view.agent_view([], staged).binds
    assert str(extra.resolve()) not in python_binds()


def test_folders_above_binds_are_made_searchable_also_under_the_fresh_tmp():
    from a2c.runtime.sandbox.local import parent_dirs
    argv = parent_dirs(["/tmp/clone/.venv", "/root/.pyenv/versions/3.11.7", "/usr/lib/x"])
    made = [argv[i + 3] for i in range(0, len(argv), 4)]
    assert argv[:3] == ["--perms", "0755", "--dir"]
    # /tmp is a fresh tmpfs inside: its sub-folders must be made (bubblewrap would make them
    # 0700 root, which the unprivileged agent cannot cross); /tmp itself keeps its 1777.
    assert made == ["/tmp/clone", "/root", "/root/.pyenv", "/root/.pyenv/versions"]
