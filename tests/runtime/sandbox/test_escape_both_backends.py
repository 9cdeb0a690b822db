"""The same escape checks in both sandbox backends (slow): a probe agent, run on arith with the
tiny model, tries to read the held-out data, the grader's token and service config, the run
record and the project's tree, to write the record, and to reach any network address; it
must fail at each, while its own split and the grader's socket work. `local` needs bubblewrap,
`docker` an engine; each skips in one line without."""

from __future__ import annotations

import json

import pytest
from scripted_agents import PROBE_IO, make_agent

from a2c.contracts.events import verify_events
from a2c.runtime import run as run_mod
from a2c.runtime.sandbox.local import bwrap_works

_PROBE = r"""
python3 - "$PROBE_RUN" "$PROBE_PROJECT" <<'PY'
import json, os, socket, subprocess, sys
run, project = sys.argv[1], sys.argv[2]
%PROBE_IO%
def connect(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
        return "CONNECTED"
    except Exception as e:
        return "ERR " + type(e).__name__
def found(names):
    hits = []
    for root, dirs, files in os.walk("/"):
        # not the kernel's trees, nor /usr: the system, read-only and the same in every run
        dirs[:] = [d for d in dirs
                   if os.path.join(root, d) not in ("/proc", "/sys", "/dev", "/usr")]
        hits += [os.path.join(root, f) for f in files if f in names]
    return hits
def imports(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True).returncode == 0
r = {
    "uid": os.getuid(),
    "token": tryread(run + "/grader/token"),
    "service_json": tryread(run + "/grader/service.json"),
    "heldout": tryread(run + "/grader/heldout.jsonl"),
    "run_json": tryread(run + "/run.json"),
    "events": tryread(run + "/events.jsonl"),
    "events_write": trywrite(run + "/events.jsonl"),
    "run_json_write": trywrite(run + "/run.json"),
    "data_write": trywrite(os.environ["A2C_DATA_DIR"] + "/train.jsonl"),
    "journal_write": trywrite(run + "/submissions.jsonl"),
    "model_write": trywrite(os.environ["A2C_BASE_MODEL"] + "/config.json"),
    "data": tryread(os.environ["A2C_DATA_DIR"] + "/train.jsonl"),
    "secret_files": found({"heldout.jsonl", "token", "service.json", "events.jsonl",
                           "run.json", "submissions.jsonl", "record.key"}),
    "project": [p for p in ("specs", "tests", "generated", "compiler", "analysis")
                if os.path.exists(os.path.join(project, p))],
    "compiler_importable": imports("a2c.compiler.resolve"),
    "grader_service_importable": imports("a2c.runtime.grader_service.service"),
    "engine_socket": [p for p in ("/var/run/docker.sock", "/run/docker.sock")
                      if os.path.exists(p)],
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "net": {f"{h}:{p}": connect(h, p) for h, p in
            (("1.1.1.1", 53), ("8.8.8.8", 443), ("deb.debian.org", 80), ("pypi.org", 443))},
}
t = subprocess.run([sys.executable, "a2c_client.py", "time", "--json"], capture_output=True,
                   text=True)
r["time"] = json.loads(t.stdout) if t.returncode == 0 else t.stderr
json.dump(r, open("probe.json", "w"))
PY
"""


PROBE = _PROBE.replace("%PROBE_IO%", PROBE_IO.strip())


def _backend_ready(request, backend: str) -> None:
    if backend == "local" and not bwrap_works():
        pytest.skip("no bubblewrap: the local backend's sandbox cannot be checked here")
    if backend == "docker":
        request.getfixturevalue("arith_image")   # skips in one line without an engine


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
def test_probe_reaches_nothing_but_its_split_and_the_grader(tmp_path, request, backend):
    from a2c.paths import project_root
    _backend_ready(request, backend)
    agent = make_agent(tmp_path, "probe", PROBE)
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="90s",
                              backend=backend, runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    ctx.run.options.agent_env = {"PROBE_RUN": str(ctx.run_dir),
                                       "PROBE_PROJECT": str(project_root())}
    ctx.save()
    summary = run_mod.execute(ctx, report=print)
    assert summary["isolation"] == {"local": "bubblewrap", "docker": "docker"}[backend]
    probe = json.loads((ctx.run_dir / "workspace" / "probe.json").read_text())
    assert probe["uid"] != 0
    for key in ("token", "service_json", "heldout", "run_json", "events", "events_write",
                "run_json_write", "journal_write", "data_write", "model_write"):
        assert probe[key].startswith("ERR"), (key, probe)
    assert probe["secret_files"] == [], probe["secret_files"]
    assert probe["project"] == [] and not probe["compiler_importable"]
    assert not probe["grader_service_importable"]
    assert probe["engine_socket"] == []                        # no way to the Docker engine
    assert probe["interfaces"] == ["lo"], probe["interfaces"]
    assert all(v.startswith("ERR") for v in probe["net"].values()), probe["net"]
    assert probe["data"].startswith("READ {")                 # its own split is there
    assert 0 < probe["time"]["remaining_s"] <= 90, probe["time"]   # and the grader answers
    assert "tampered" not in (ctx.run_dir / "events.jsonl").read_text()
    assert "tampered" not in (ctx.run_dir / "run.json").read_text()
    assert verify_events(ctx.run_dir / "events.jsonl").ok


# What the agent can see of its own processes and do to its system: every process's argv and
# environment (the host checks them for host paths: nothing of the run is passed in here), a
# user namespace (`unshare -Ur`), a write to the system folders, a GPU node.
_SYSTEM_PROBE = r"""
python3 - <<'PY'
import glob, json, os, shutil, subprocess
def tryread(path):
    try:
        with open(path, "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except Exception as e:
        return "ERR " + type(e).__name__
def trywrite(path):
    try:
        with open(path, "w") as fh:
            fh.write("tampered")
        return "WROTE"
    except Exception as e:
        return "ERR " + type(e).__name__
procs = {}
for folder in glob.glob("/proc/[0-9]*"):
    procs[folder] = {"cmdline": tryread(folder + "/cmdline"), "environ": tryread(folder + "/environ")}
unshare = shutil.which("unshare")
userns = subprocess.run([unshare, "-Ur", "true"], capture_output=True, text=True) if unshare else None
r = {
    "procs": procs,
    "pid1": procs.get("/proc/1", {}).get("cmdline", ""),
    "unshare": unshare,
    "userns_rc": userns.returncode if userns else None,
    "userns_err": userns.stderr.strip() if userns else None,
    "system_write": {p: trywrite(p) for p in ("/usr/a2c-probe", "/etc/a2c-probe",
                                             "/bin/a2c-probe", "/a2c-probe")},
    "gpu_nodes": glob.glob("/dev/nvidia*"),
}
json.dump(r, open("system-probe.json", "w"))
PY
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
def test_no_user_namespace_no_system_write_no_host_path_in_any_process(tmp_path, request,
                                                                       backend):
    """Issue 23 in both backends: `unshare -Ur true` fails (docker: the default seccomp
    profile refuses CLONE_NEWUSER without CAP_SYS_ADMIN; local: bubblewrap's --disable-userns),
    the system folders are read-only, no GPU node is there that the run did not give. In the
    container, no process's argv or environment names a host path of the run, the project or
    a2c's venv (PID 1 is docker-init running the launcher; bubblewrap's own PID 1 keeps its
    argv, which docs/runtime.md states for the local backend)."""
    import sys

    from a2c.paths import project_root
    _backend_ready(request, backend)
    agent = make_agent(tmp_path, "sysprobe", _SYSTEM_PROBE)
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="60s",
                              backend=backend, runs_dir=tmp_path / "runs")
    ctx = run_mod.prepare(opts, report=lambda _: None)
    run_mod.execute(ctx, report=print)
    probe = json.loads((ctx.run_dir / "workspace" / "system-probe.json").read_text())
    assert probe["unshare"], "unshare is not in the sandbox: the check would prove nothing"
    assert probe["userns_rc"] != 0, probe
    assert all(v.startswith("ERR") for v in probe["system_write"].values()), \
        probe["system_write"]
    assert probe["gpu_nodes"] == []                         # the run asked for no GPU
    if backend != "docker":
        return
    assert "docker-init" in probe["pid1"] and "/run/a2c/agent/launch.sh" in probe["pid1"]
    host = {str(ctx.run_dir), str(tmp_path), str(project_root()), sys.prefix}
    leaks = {(proc, part, path) for proc, seen in probe["procs"].items()
             for part, text in seen.items() for path in host if path in text}
    assert leaks == set(), sorted(leaks)[:5]
