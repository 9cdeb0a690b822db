"""Running a scripted "agent" for real, with the host-side process recorder watching it: the
local backend (bubblewrap where it works, as a real run), the run's folders laid out as RunPaths
names them, then a submission snapshot and the `process_record` event, so that the analysis
reads exactly what a run would leave (tests of issue 32: what ran, seen from the host)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from a2c.analysis.record import SnapshotTaken
from a2c.contracts.outside import outside_roots
from a2c.contracts.run_paths import RunPaths
from a2c.runtime.process_record import record_agent
from a2c.runtime.snapshots import Snapshotter
from a2c.timefmt import iso_utc

# a fake trainer's body: it trains nothing (the code above it is what the analysis reads) but
# writes a "model" into the folder it is given, holding the file open long enough to be seen
WRITE_MODEL = '''
import os as _os, sys as _sys, time as _time
_out = _os.path.join(_os.environ.get("A2C_OUTPUT_DIR", "output"), "fin" + "al")
_os.makedirs(_out, exist_ok=True)
with open(_os.path.join(_out, "model.safetensors"), "wb") as _f:
    _f.write(b"weights")
    _f.flush()
    _time.sleep(float(_os.environ.get("HOLD_S", "0.8")))
'''


def run_agent(tmp_path: Path, script: str, files: dict[str, str | bytes] | None = None,
              interval_s: float = 0.1, timeout: float = 60.0) -> SimpleNamespace:
    """Run `script` (bash, in the workspace) as the agent; `files`: workspace-relative paths
    (or "/tmp/..." for the agent's /tmp) and their contents, written before it starts."""
    from a2c.runtime.sandbox import SandboxSpec
    from a2c.runtime.sandbox.local import LocalBackend

    root = tmp_path / "run"
    paths = RunPaths(root)
    for folder in (paths.workspace / "output", paths.logs, paths.data, root / "model",
                   paths.agent_tmp, paths.agent_home):
        folder.mkdir(parents=True, exist_ok=True)
    (paths.data / "train.jsonl").write_text('{"id": "1"}\n')
    (root / "model" / "config.json").write_text("{}")
    for rel, content in (files or {}).items():
        target = paths.agent_tmp / rel[5:] if rel.startswith("/tmp/") else paths.workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    (paths.agent / "run.sh").parent.mkdir(parents=True, exist_ok=True)
    (paths.agent / "run.sh").write_text(script)
    backend = LocalBackend()
    confined = backend.isolation == "bubblewrap"
    spec = SandboxSpec(command=["bash", "/run/a2c/agent/run.sh" if confined
                                else str(paths.agent / "run.sh")],
                       workspace=paths.workspace, data_dir=paths.data, model_dir=root / "model",
                       socket_path=None, log_path=paths.agent_log,
                       command_log=paths.commands_log, marker=f"pr-{time.time_ns()}",
                       extra_ro={"/run/a2c/agent": paths.agent}, agent_tmp=paths.agent_tmp,
                       agent_home=paths.agent_home)
    started = time.time()
    proc = backend.start(spec)
    recorder = record_agent(paths, proc, backend, {"A2C_TOKEN": "secret-token-value"},
                            interval_s)
    try:
        rc = proc.wait(timeout)
    finally:
        summary = recorder.stop()
        proc.stop(grace=1.0)
    received = time.time()
    snap = Snapshotter(paths.snapshots, paths.workspace, outside=outside_roots(paths))
    info = snap.snapshot("submission", submission_id=1)
    snap.tag_submission(1, info["commit"])
    return SimpleNamespace(
        root=root, paths=paths, rc=rc, commit=info["commit"], summary=summary,
        isolation=backend.isolation, received=received, started=started,
        log=paths.agent_log.read_text(errors="replace") if paths.agent_log.is_file() else "",
        events=[{"type": "process_record", "data": summary}],
        snapshot_taken=[SnapshotTaken(commit=info["commit"], reason="submission",
                                      submission_id="1", ts=received, files=info["files"],
                                      bytes=info["bytes"])])


def route(record: SimpleNamespace, mode: str = "rl-only",
          model_path: str = "/workspace/output/final") -> dict:
    """The report's route section for one submission of `model_path`, received at the end."""
    from a2c.analysis.attribution import training_and_timeline
    subs = [{"id": "1", "snapshot": record.commit, "received_at": iso_utc(record.received + 1),
             "model_path": model_path, "valid": True, "base_copy": False, "score": 50.0,
             "t_s": 60.0}]
    section, _ = training_and_timeline(record, subs, mode)
    return section.to_dict()      # as report.json holds it
