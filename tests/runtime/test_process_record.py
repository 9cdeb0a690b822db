"""The host-side process recorder (runtime/process_record.py, process_capture.py,
process_code.py) on real processes: what it records of each, how it reads their code, what it
records them writing, and the record's integrity (a2c.contracts.process_record)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from a2c.contracts.process_record import read_process_record, verify_record
from a2c.runtime.process_code import python_target, shell_target, targets
from a2c.runtime.process_record import ProcessRecorder

PY = sys.executable


# ------------------------------------------------------------------ arguments
@pytest.mark.parametrize("argv,how,what", [
    (["python3", "train.py", "--lr", "1"], "script", "train.py"),
    (["python3", "-u", "-X", "dev", "-W", "ignore", "t.py"], "script", "t.py"),
    (["python3", "-uc", "print(1)"], "inline", "print(1)"),
    (["python3", "-c", "print(1)", "x.py"], "inline", "print(1)"),
    (["python3", "-m", "torch.distributed.run", "t.py"], "module", "torch.distributed.run"),
    (["python3", "-mpip", "list"], "module", "pip"),
    (["python3", "-"], "stdin", None),
    (["python3"], "stdin", None),
    (["python3", "-i", "t.py"], "script", "t.py"),
])
def test_python_arguments(argv, how, what):
    found = python_target(argv[1:])
    assert found.how == how
    assert (found.path or found.text or found.module) == what


@pytest.mark.parametrize("argv,how,what", [
    (["bash", "-lc", "python x.py"], "inline", "python x.py"),
    (["bash", "-e", "-o", "pipefail", "run.sh", "a"], "script", "run.sh"),
    (["sh", "--norc", "--rcfile", "rc", "s.sh"], "script", "s.sh"),
    (["bash"], "stdin", None),
])
def test_shell_arguments(argv, how, what):
    found = shell_target(argv[1:])
    assert found.how == how and (found.path or found.text) == what


def test_interpreter_by_its_executable_not_argv0():
    """`exec -a innocent python3 sft.py`: argv[0] lies, /proc/PID/exe does not."""
    found = targets("/usr/bin/python3.11", ["innocent", "sft.py"])
    assert [(t.how, t.path) for t in found] == [("script", "sft.py")]
    assert targets("/usr/bin/ls", ["ls", "-l"]) == []
    runner = targets("/usr/bin/python3", ["python3", "-m", "cProfile", "-o", "p", "t.py"])
    assert [(t.how, t.path or t.module) for t in runner] == [("module", "cProfile"),
                                                            ("argument", "t.py")]


# ------------------------------------------------------------------ real processes
def record(tmp_path: Path, script: str, env: dict | None = None, wait: float = 30.0,
           secrets: dict | None = None, interval_s: float = 0.05
           ) -> tuple[list[dict], dict, Path]:
    """Run `script` (bash) in RUN/workspace as an unconfined agent (its own session, the
    marker), record it, return (entries, the stop summary, the workspace)."""
    run = tmp_path / "run"
    ws = run / "workspace"
    (ws / "output").mkdir(parents=True, exist_ok=True)
    (run / "logs").mkdir(exist_ok=True)
    (run / "agent-tmp").mkdir(exist_ok=True)
    marker = f"rec-{time.time_ns()}"
    proc = subprocess.Popen(["bash", "-c", script], cwd=ws, start_new_session=True,
                            env={**os.environ, "A2C_SANDBOX_ID": marker, **(env or {})})
    recorder = ProcessRecorder(run, root_pid=proc.pid, pgid=proc.pid, marker=marker,
                               views={"workspace": str(ws), "output": str(ws / "output")},
                               places=[str(ws), str(run / "agent-tmp")], secrets=secrets,
                               interval_s=interval_s, ran_file=run / "snapshots.git" / "a2c-ran",
                               isolation="none").start()
    try:
        proc.wait(wait)
    finally:
        summary = recorder.stop()
        if proc.poll() is None:
            proc.kill()
    entries, problems = read_process_record(run)
    assert problems == []
    return entries, summary, ws


def code(entries: list[dict], **match) -> list[dict]:
    return [e for e in entries if e["kind"] == "code"
            and all(e.get(k) == v for k, v in match.items())]


def kept(run: Path, entry: dict) -> str:
    return (run / entry["file"]).read_text()


def test_scripts_modules_imports_and_writes_are_recorded(tmp_path):
    ws = tmp_path / "run" / "workspace"
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    (ws / "node_modules" / "__init__.py").write_text("")
    (ws / "node_modules" / "pkg" / "__init__.py").write_text("")
    (ws / "node_modules" / "pkg" / "train.py").write_text("LR = 5e-4  # SFTTrainer lives here\n")
    (ws / "main.csv").write_text(
        "from node_modules.pkg import train\nimport time, os\n"
        "os.makedirs('output/m', exist_ok=True)\n"
        "with open('output/m/w.bin', 'wb') as f:\n    time.sleep(0.4)\n")
    entries, summary, _ = record(tmp_path, f"{PY} main.csv && exec {PY} -c 'import time; "
                                           "time.sleep(0.2)'")
    run = tmp_path / "run"
    script = code(entries, how="script", language="python")
    assert [e["path"] for e in script] == [str(ws / "main.csv")] and script[0]["captured"]
    assert "node_modules.pkg" in kept(run, script[0])
    imports = {e["path"] for e in code(entries, how="import")}
    assert str(ws / "node_modules" / "pkg" / "train.py") in imports
    writes = [e for e in entries if e["kind"] == "write"]
    assert [w["path"] for w in writes] == [str(ws / "output" / "m" / "w.bin")]
    # `exec` in the same pid: a new image of the process, its inline code kept
    images = [e for e in entries if e["kind"] == "process" and e["image"] > 0]
    assert any(e["argv"][1:2] == ["-c"] for e in images)
    assert code(entries, how="inline", language="python")
    # the files that ran are listed for the snapshots
    ran = (run / "snapshots.git" / "a2c-ran").read_text().split()
    assert "main.csv" in ran and "node_modules/pkg/train.py" in ran
    assert summary["processes"] >= 2 and summary["sha256"]
    assert [p.split(":")[0] for p in summary["problems"]] == ["isolation none"]


def test_a_shell_script_deleted_while_it_runs_is_read_from_its_descriptor(tmp_path):
    tmp = tmp_path / "run" / "agent-tmp"
    tmp.mkdir(parents=True)
    (tmp / "s.sh").write_text('rm -- "$0"\nsleep 0.5\n# trl sft here\n')
    entries, _, _ = record(tmp_path, f"bash {tmp / 's.sh'}")
    found = code(entries, how="script", language="shell")
    assert found and found[0]["captured"], found
    assert "trl sft here" in kept(tmp_path / "run", found[0])


def test_a_script_replaced_after_its_process_started_is_marked(tmp_path):
    """The script swaps itself for a decoy as soon as it runs, before the recorder's first
    look (a slow interval here): what was read is marked as possibly not what ran."""
    ws = tmp_path / "run" / "workspace"
    ws.mkdir(parents=True)
    (ws / "t.py").write_text("import os, time\n"
                             "open('t.new', 'w').write('DECOY = 1\\n')\n"
                             "os.replace('t.new', 't.py')\n"
                             "time.sleep(2.0)\n")
    entries, _, _ = record(tmp_path, f"sleep 0.1; {PY} t.py", interval_s=0.8)
    found = code(entries, how="script", language="python")
    assert found and kept(tmp_path / "run", found[0]) == "DECOY = 1\n", found
    assert found[0]["changed_after_start"] is True, found


def test_program_from_stdin_startup_files_secrets_and_binaries(tmp_path):
    ws = tmp_path / "run" / "workspace"
    (ws / "lib").mkdir(parents=True)
    (ws / "lib" / "sitecustomize.py").write_text("import os  # runs in every python\n")
    (ws / "prog.py").write_text("import time; time.sleep(0.4)\n")
    shutil.copy("/bin/sleep", ws / "mysleep")
    script = (f"{PY} - < prog.py; PYTHONPATH={ws / 'lib'} {PY} -c 'import time; "
              "time.sleep(0.3)  # key=supersecretvalue'; ./mysleep 0.4")
    entries, _, _ = record(tmp_path, script, secrets={"API_KEY": "supersecretvalue"})
    run = tmp_path / "run"
    stdin = code(entries, how="stdin")
    assert stdin and stdin[0]["captured"] and "sleep" in kept(run, stdin[0])
    startup = code(entries, how="startup")
    assert startup and startup[0]["path"] == str(ws / "lib" / "sitecustomize.py")
    inline = code(entries, how="inline", language="python")
    assert inline and "supersecretvalue" not in kept(run, inline[0]) and inline[0]["redacted"]
    raw = (run / "logs" / "processes.jsonl").read_text()
    assert "supersecretvalue" not in raw
    binary = code(entries, how="exe")
    assert binary and binary[0]["language"] == "binary" and binary[0]["agent_place"] is True


def test_a_fork_is_its_parents_program(tmp_path):
    """A fork (DataLoader workers, multiprocessing) runs its parent's code: marked `forked`,
    nothing of its own read; an exec in a child is a new program."""
    ws = tmp_path / "run" / "workspace"
    ws.mkdir(parents=True)
    (ws / "p.py").write_text("import os, time\n"
                             "if os.fork() == 0:\n    time.sleep(0.5)\n    os._exit(0)\n"
                             "time.sleep(0.6)\n")
    entries, _, _ = record(tmp_path, f"{PY} p.py")
    procs = [e for e in entries if e["kind"] == "process" and e["argv"][1:] == ["p.py"]]
    assert sorted(bool(e.get("forked")) for e in procs) == [False, True], procs
    child = next(e for e in procs if e.get("forked"))
    assert not [e for e in entries if e["kind"] == "code" and e["pid"] == child["pid"]]


def test_a_library_copied_from_an_installed_package_is_no_gap(tmp_path):
    """jericho copies its libfrotz.so to a temporary folder before loading it: a byte-for-byte
    copy of an installed library is no gap; the same file changed by one byte is."""
    import numpy

    from a2c.analysis.processes import load
    lib = next(Path(numpy.__file__).parent.rglob("_operand_flag_tests*.so"))
    tmp = tmp_path / "run" / "agent-tmp"
    tmp.mkdir(parents=True)
    shutil.copy(lib, tmp / lib.name)
    changed = bytearray(lib.read_bytes())
    changed[-1] ^= 1
    (tmp / "other").mkdir()
    (tmp / "other" / lib.name).write_bytes(bytes(changed))
    # the copy deleted once loaded, as jericho does: read through /proc/PID/map_files
    script = (f"{PY} -c 'import ctypes, os, time; ctypes.CDLL(\"{tmp / lib.name}\"); "
              f"os.unlink(\"{tmp / lib.name}\"); "
              f"ctypes.CDLL(\"{tmp / 'other' / lib.name}\"); time.sleep(1.6)'")
    entries, summary, _ = record(tmp_path, script)
    libs = code(entries, how="library")
    assert sorted(e["path"] for e in libs) == sorted([str(tmp / lib.name),
                                                      str(tmp / "other" / lib.name)])
    evidence = load(tmp_path / "run", [{"type": "process_record", "data": summary}])
    gaps = [g for p in evidence.procs.values() for g in p.gaps]
    assert len(gaps) == 1 and str(tmp / "other" / lib.name) in gaps[0], gaps


def test_a_library_is_compared_by_its_mapped_segments_when_unreadable(tmp_path):
    """Without map_files (an unprivileged runtime) and with the copy gone, the library's code
    segments, read from the process's memory, are compared with the installed one."""
    import numpy

    from a2c.analysis.installed import installed_copy
    from a2c.runtime.process_capture import _segments
    lib = next(Path(numpy.__file__).parent.rglob("_operand_flag_tests*.so"))
    copy = tmp_path / lib.name
    shutil.copy(lib, copy)
    proc = subprocess.Popen([PY, "-c", f"import ctypes, os, sys, time; ctypes.CDLL({str(copy)!r})"
                             f"; os.unlink({str(copy)!r}); print(1, flush=True); time.sleep(5)"],
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"1"
        maps = Path(f"/proc/{proc.pid}/maps").read_text().splitlines()
        regions = [line.split(None, 5) for line in maps if str(copy) in line]
        segments = _segments(proc.pid, regions)
    finally:
        proc.kill()
    assert segments and all(size > 0 for _, size, _ in segments)
    assert installed_copy(str(copy), None, segments)
    segments[0][2] = "0" * 64
    assert not installed_copy(str(copy), None, segments)


def test_a_detached_grandchild_is_still_recorded(tmp_path):
    """setsid + double fork: the parent is gone, the marker (and the process group on the
    way) still name it."""
    entries, _, _ = record(tmp_path, f"setsid bash -c '{PY} -c \"import time; "
                                     "time.sleep(0.6)\" &' ; sleep 0.8")
    assert any(e["kind"] == "process" and "time.sleep(0.6)" in " ".join(e["argv"])
               for e in entries)


def test_the_record_is_verified_against_its_event(tmp_path):
    entries, summary, _ = record(tmp_path, f"{PY} -c 'import time; time.sleep(0.2)'")
    run = tmp_path / "run"
    events = [{"type": "process_record", "data": summary}]
    assert verify_record(run, events) == []
    kept_file = next((run / "logs" / "processes").iterdir())
    kept_file.write_text("print('swapped')\n")
    assert any("does not hash to its name" in p for p in verify_record(run, events))
    log = run / "logs" / "processes.jsonl"
    log.write_text(log.read_text().replace('"python', '"pyth0n'))
    assert any("does not match" in p for p in verify_record(run, events))
    assert verify_record(run, []) == ["no process_record event holds the record's digest"]


def test_the_record_is_sealed_with_the_run(tmp_path):
    from a2c.contracts.seal import sealed_paths
    record(tmp_path, f"{PY} -c 'import time; time.sleep(0.3)'")
    sealed = sealed_paths(tmp_path / "run")
    assert "logs/processes.jsonl" in sealed
    assert any(p.startswith("logs/processes/") for p in sealed)


def test_the_snapshot_keeps_files_that_ran_whatever_the_rules(tmp_path):
    from a2c.runtime.snapshots import RAN_FILE, Snapshotter
    ws = tmp_path / "ws"
    (ws / "wandb").mkdir(parents=True)
    (ws / "wandb" / "sft.py").write_text("x = 1\n")
    (ws / "big.py").write_text("#" * 2_000_000)
    (ws / "data.csv").write_text("print(1)\n")
    (ws / "other.csv").write_text("a,b\n")
    repo = tmp_path / "snap.git"
    repo.mkdir()
    (repo / RAN_FILE).write_text("wandb/sft.py\nbig.py\ndata.csv\n../escape.py\n")
    snap = Snapshotter(repo, ws)
    files = snap.files_at(snap.snapshot("periodic")["commit"])
    assert files == ["big.py", "data.csv", "wandb/sft.py"]


def test_bubblewrap_processes_are_seen_in_their_own_view(tmp_path):
    """Confined: argv and cwd as the agent sees them, its code read through its own root, and
    whether a place is the agent's from the sandbox's mount table."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "adversarial"))
    from process_helpers import WRITE_MODEL, run_agent

    from a2c.runtime.sandbox.local import bwrap_works
    if not bwrap_works():
        pytest.skip("needs bubblewrap")
    rec = run_agent(tmp_path, 'cd "$A2C_WORKSPACE"\npython3 /tmp/t.py\n',
                    {"/tmp/t.py": WRITE_MODEL})
    entries, problems = read_process_record(rec.root)
    assert problems == [] and rec.summary["problems"] == []
    script = code(entries, how="script", language="python")
    assert [(e["path"], e["agent_place"], e["captured"]) for e in script] == [
        ("/tmp/t.py", True, True)]
    launcher = code(entries, how="script", language="shell")
    assert launcher and launcher[0]["path"] == "/run/a2c/agent/run.sh"
    assert launcher[0]["agent_place"] is False          # a read-only bind of the sandbox
    procs = [e for e in entries if e["kind"] == "process" and e["argv"][:1] == ["python3"]]
    assert procs and procs[0]["cwd"] == "/workspace"
    writes = [e["path"] for e in entries if e["kind"] == "write"]
    assert writes == ["/workspace/output/final/model.safetensors"]
    assert not code(entries, language="binary")          # bubblewrap's own binaries: system
    assert json.loads((rec.root / "logs" / "processes.jsonl").read_text().splitlines()[0])[
        "isolation"] == "bubblewrap"
