"""Code snapshots: a bare git repository outside the workspace, exclusion rules, no empty commits,
safe from several processes."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
from pathlib import Path

from a2c.contracts.events import read_events, verify_events
from a2c.runtime.snapshots import Snapshotter


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True, text=True,
                          check=True).stdout


def populate(ws: Path) -> None:
    (ws / "pkg").mkdir(parents=True)
    (ws / "train.py").write_text("import torch\n")
    (ws / "pkg" / "util.py").write_text("X = 1\n")
    (ws / "config.yaml").write_text("lr: 1e-5\n")
    (ws / "output" / "ckpt").mkdir(parents=True)
    (ws / "output" / "ckpt" / "config.json").write_text("{}")
    (ws / "output" / "notes.txt").write_text("in output: excluded")
    for name in ("w.safetensors", "w.bin", "w.pt", "w.pth", "m.gguf", "m.ckpt", "d.jsonl",
                 "d.parquet", "d.csv"):
        (ws / name).write_bytes(b"x" * 10)
    (ws / "big.txt").write_bytes(b"y" * 1_100_000)
    (ws / "__pycache__").mkdir()
    (ws / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    (ws / ".cache" / "hf").mkdir(parents=True)
    (ws / ".cache" / "hf" / "tok.json").write_text("{}")
    (ws / "link.py").symlink_to("train.py")


def test_snapshot_excludes_weights_data_output_caches_and_big_files(tmp_path):
    ws = tmp_path / "workspace"
    populate(ws)
    snap = Snapshotter(tmp_path / "snapshots.git", ws)
    info = snap.snapshot("periodic")
    assert info["changed"] and len(info["commit"]) == 40
    files = snap.files_at(info["commit"])
    assert files == ["config.yaml", "link.py", "pkg/util.py", "train.py"]
    assert info["files"] == 4 and info["excluded"] >= 12
    assert info["bytes"] < 100
    # The repository lives outside the workspace and is bare.
    assert not (ws / ".git").exists()
    assert git(tmp_path / "snapshots.git", "rev-parse", "--is-bare-repository").strip() == "true"


def test_unchanged_workspace_makes_no_commit(tmp_path):
    ws = tmp_path / "ws"
    populate(ws)
    snap = Snapshotter(tmp_path / "s.git", ws)
    first = snap.snapshot("periodic")
    (ws / "w.safetensors").write_bytes(b"new weights")     # excluded: still no change
    (ws / "output" / "ckpt" / "more.json").write_text("{}")
    second = snap.snapshot("periodic")
    assert second["commit"] == first["commit"] and second["changed"] is False
    (ws / "train.py").write_text("import trl\n")
    (ws / "pkg" / "util.py").unlink()
    third = snap.snapshot("periodic")
    assert third["changed"] and third["commit"] != first["commit"]
    assert snap.files_at(third["commit"]) == ["config.yaml", "link.py", "train.py"]
    log = git(tmp_path / "s.git", "log", "--format=%s", "main").split("\n")
    assert [line for line in log if line] == ["periodic", "periodic"]
    assert git(tmp_path / "s.git", "show", f"{third['commit']}:train.py") == "import trl\n"


def test_snapshot_events_and_submission_tags(tmp_path):
    ws = tmp_path / "ws"
    populate(ws)
    events = tmp_path / "events.jsonl"
    snap = Snapshotter(tmp_path / "s.git", ws, event_log=events)
    a = snap.snapshot("submission", submission_id=1)
    snap.tag_submission(1, a["commit"])
    snap.snapshot("periodic")                        # unchanged periodic: no event
    b = snap.snapshot("submission", submission_id=2)  # unchanged submission: still recorded
    assert b["commit"] == a["commit"]
    recorded = [e["data"] for e in read_events(events)]
    assert [(r["reason"], r["submission_id"], r["changed"]) for r in recorded] == [
        ("submission", 1, True), ("submission", 2, False)]
    assert recorded[0]["commit"] == a["commit"] and recorded[0]["files"] == 4
    assert verify_events(events).ok
    assert git(tmp_path / "s.git", "rev-parse", "submission-1").strip() == a["commit"]


def test_empty_workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    info = Snapshotter(tmp_path / "s.git", ws).snapshot("periodic")
    assert info["files"] == 0 and info["changed"]


def _snap_many(args):
    repo, ws, n = args
    snap = Snapshotter(repo, ws)
    commits = []
    for i in range(5):
        (Path(ws) / f"proc{n}_{i}.py").write_text(f"# {n} {i}\n")
        commits.append(snap.snapshot("periodic")["commit"])
    return commits


def test_concurrent_processes_keep_a_linear_history(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    repo = tmp_path / "s.git"
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        results = pool.map(_snap_many, [(str(repo), str(ws), n) for n in range(3)])
    assert all(len(c) == 5 for c in results)
    final = Snapshotter(repo, ws).snapshot("final")
    files = Snapshotter(repo, ws).files_at(final["commit"])
    assert len(files) == 15
    # Linear: every commit has at most one parent and the chain reaches every recorded commit.
    history = git(repo, "rev-list", "--parents", "main").split("\n")
    assert all(len(line.split()) <= 2 for line in history if line)
    reachable = {line.split()[0] for line in history if line}
    assert {c for cs in results for c in cs} <= reachable
    assert not (ws / ".git").exists() and os.listdir(ws)
