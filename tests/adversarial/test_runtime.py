"""Hostile agents against the runtime (issue 12, points 2, 3 and 7): the runtime never reads what
the agent can write, the deadline holds whatever the agent puts in its workspace, passed secrets
stay out of the record, and a generated task's held-out items cannot be regenerated from its spec.

Each slow test is one short real run of the built-in arithmetic task with the tiny model, the
agent a shell script inside the real sandbox (bubblewrap where it works)."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from scripted_agents import make_agent

from a2c.contracts.events import read_events, verify_events
from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import read_service_fields
from a2c.runtime import run as run_mod
from a2c.runtime.run.agent import copy_transcript, update_run_meta
from a2c.runtime.sandbox.local import bwrap_works
from a2c.runtime.snapshots import Snapshotter

HAVE_BWRAP = bwrap_works()


# ------------------------------------------------------------------------------ helpers


def prepare(tmp_path: Path, agent: Path, budget: str, **options):
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget=budget,
                              runs_dir=tmp_path / "runs", snapshot_every_s=1)
    ctx = run_mod.prepare(opts, report=lambda _: None)
    ctx.run.options = dataclasses.replace(ctx.run.options, **options)
    ctx.save()
    return ctx


def ts(event: dict) -> float:
    return datetime.strptime(event["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=timezone.utc).timestamp()


def workspace_bytes(ws: Path) -> bytes:
    """Every regular file of the workspace (no symlink followed, no FIFO opened)."""
    out = []
    for dirpath, _dirs, files in os.walk(ws):
        for name in files:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_size < 50_000_000:
                out.append(path.read_bytes())
    return b"\n".join(out)


def deadline_timing(run_dir: Path) -> tuple[float, float]:
    """(deadline_reached - deadline, agent_exited - deadline) in seconds."""
    run = json.loads((run_dir / "run.json").read_text())
    events = read_events(run_dir / "events.jsonl")
    reached = next(e for e in events if e["type"] == "deadline_reached")
    exited = next(e for e in events if e["type"] == "agent_exited")
    assert exited["data"]["reason"] == "deadline"
    return ts(reached) - run["deadline"], ts(exited) - run["deadline"]


# ------------------------------------------------------------------------------ fast: the parts
def _fake_run(tmp_path: Path) -> tuple[RunPaths, RunInfo]:
    paths = RunPaths(tmp_path / "run")
    for sub in (paths.workspace, paths.results, paths.grader, paths.logs):
        sub.mkdir(parents=True)
    paths.baseline_result.write_text('{"gold": "HELDOUT-GOLD"}')
    (paths.grader / "service.json").write_text('{"token": "TOKEN-XYZ"}')
    run = RunInfo.from_dict({"run_id": "r", "task": "t", "agent": "a", "mode": "free", "seed": 0,
                             "deadline": time.time() + 60,
                             "budget": {"wall_clock_s": 60}, "base_model": {"spec": "tiny"}})
    return paths, run


@pytest.mark.parametrize("attack", ["baseline", "service", "run_json", "kmsg", "fifo", "dir"])
def test_run_meta_write_never_reads_or_follows(tmp_path, attack):
    paths, run = _fake_run(tmp_path)
    meta = paths.run_meta
    targets = {"baseline": "../results/baseline.json", "service": "../grader/service.json",
               "run_json": "../run.json", "kmsg": "/proc/kmsg"}
    if attack in targets:
        meta.symlink_to(targets[attack])
    elif attack == "fifo":
        os.mkfifo(meta)
    else:
        (meta / "sub").mkdir(parents=True)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (update_run_meta(paths, run, 12.0), done.set()),
                              daemon=True)
    worker.start()
    assert done.wait(5), "update_run_meta blocked"
    assert not meta.is_symlink() and meta.is_file()
    data = json.loads(meta.read_text())
    assert data["remaining_s"] == 12.0 and "HELDOUT-GOLD" not in meta.read_text()
    assert "TOKEN" not in meta.read_text()
    assert paths.baseline_result.read_text() == '{"gold": "HELDOUT-GOLD"}'
    assert not (paths.root / "run.json").exists()


def test_run_meta_refuses_a_swapped_workspace(tmp_path):
    paths, run = _fake_run(tmp_path)
    real = paths.workspace.rename(tmp_path / "elsewhere")
    paths.workspace.symlink_to(paths.results)
    with pytest.raises(OSError):
        update_run_meta(paths, run, 1.0)
    assert sorted(p.name for p in paths.results.iterdir()) == ["baseline.json"]
    assert real.is_dir()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "dir_symlink"])
def test_transcript_copy_follows_nothing(tmp_path, kind):
    paths, _ = _fake_run(tmp_path)
    (paths.workspace / "t").mkdir()
    if kind == "symlink":
        (paths.workspace / "t" / "log.txt").symlink_to(paths.baseline_result)
        (paths.workspace / "t" / "ok.txt").write_text("mine")
    elif kind == "fifo":
        os.mkfifo(paths.workspace / "t" / "log.txt")
        (paths.workspace / "t" / "ok.txt").write_text("mine")
    else:
        (paths.workspace / "t").rmdir()
        (paths.workspace / "t").symlink_to(paths.grader)
    agent = {"transcript": {"source": "file", "path": "/workspace/t", "ext": "d"}}
    result = copy_transcript(agent, paths)
    copied = paths.transcript("d")
    if kind == "dir_symlink":
        assert result is None and not copied.exists()
    else:
        assert result and (copied / "ok.txt").read_text() == "mine"
        assert not (copied / "log.txt").exists()


def test_snapshot_follows_nothing_blocks_on_nothing_and_redacts(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = "sk-test-" + secrets.token_hex(8)
    (ws / "train.py").write_text(f"KEY = '{secret}'\n")
    os.mkfifo(ws / "pipe.py")
    (ws / "leak.py").symlink_to(tmp_path / "outside.txt")
    (tmp_path / "outside.txt").write_text("OUTSIDE-CONTENT")
    (ws / "link_dir").symlink_to(tmp_path)
    snap = Snapshotter(tmp_path / "s.git", ws, secrets={"PROVIDER_KEY": secret})
    info = snap.snapshot("periodic")
    assert snap.files_at(info["commit"]) == ["leak.py", "train.py"]   # links recorded, not followed
    log = subprocess.run(["git", f"--git-dir={tmp_path / 's.git'}", "log", "-p", "--all"],
                         capture_output=True, text=True, check=True).stdout
    assert secret not in log and "[redacted:PROVIDER_KEY]" in log
    assert "OUTSIDE-CONTENT" not in log


def test_snapshot_over_budget_is_skipped_with_a_reason(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(60):
        (ws / f"f{i}.py").write_text("x")
    snap = Snapshotter(tmp_path / "s.git", ws, max_files=50)
    info = snap.snapshot("periodic")
    assert info["changed"] is False and "more than 50 files" in info["skipped"]
    assert "more than 50" in (tmp_path / "s.git" / "a2c-skipped.jsonl").read_text()


def test_generated_heldout_cannot_be_regenerated_from_the_spec(tmp_path):
    """The spec names generator, params and seed; the prepared held-out split shares no problem
    with what they generate, and the agent's split is exactly what they generate."""
    from a2c.contracts.bundle import Bundle
    from a2c.runtime.data import generators
    agent = make_agent(tmp_path, "idle", "true\n")
    ctx = prepare(tmp_path, agent, "30s")
    source = Bundle.load(ctx.run_dir / "bundle").task.data.source
    public = generators.arithmetic(source["params"], source["seed"], tmp_path)
    heldout = [json.loads(line) for line in
               (ctx.run_dir / "grader" / "heldout.jsonl").read_text().splitlines()]
    train = [json.loads(line) for line in
             (ctx.run_dir / "data" / "train.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in train] == [r["question"] for r in public["train"]]
    regenerated = {r["question"] for r in public["test"]} | {r["question"] for r in public["train"]}
    assert len(heldout) == 100 and not {r["prompt"] for r in heldout} & regenerated

    def pair(text):
        words = text.split()
        return frozenset((words[2], words[4].rstrip("?")))

    assert not {pair(r["prompt"]) for r in heldout} & {pair(q) for q in regenerated}


# ------------------------------------------------------------------------------ slow: real runs
RUN_META_ATTACK = r"""
trap '' TERM
report=attack.log
for target in ../results/baseline.json ../grader/service.json ../run.json /proc/kmsg FIFO; do
    rm -rf run_meta.json
    if [ "$target" = FIFO ]; then mkfifo run_meta.json; else ln -s "$target" run_meta.json; fi
    sleep 1.6
    if [ -L run_meta.json ] || [ -p run_meta.json ]; then echo "$target: still there" >> $report
    else echo "$target: replaced" >> $report; fi
done
rm -rf run_meta.json; ln -s /proc/kmsg run_meta.json
sleep 300
"""


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not available")
def test_run_meta_symlinks_and_fifo_leak_nothing_crash_nothing_delay_nothing(tmp_path):
    agent = make_agent(tmp_path, "meta-attack", RUN_META_ATTACK)
    ctx = prepare(tmp_path, agent, "14s", meta_every_s=0.5)
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["status"] == "no_submission"   # it never submits
    ws = ctx.run_dir / "workspace"
    report = (ws / "attack.log").read_text().splitlines()
    assert report == [f"{t}: replaced" for t in ("../results/baseline.json",
                                                 "../grader/service.json", "../run.json",
                                                 "/proc/kmsg", "FIFO")], report
    content = workspace_bytes(ws)
    token = read_service_fields(ctx.run_dir)["token"]
    assert token.encode() not in content
    for line in (ctx.run_dir / "grader" / "heldout.jsonl").read_text().splitlines():
        assert json.loads(line)["prompt"].encode() not in content
    assert str(ctx.run_dir / "grader").encode() not in content
    reached, exited = deadline_timing(ctx.run_dir)
    assert reached < 2.0 and exited < 2.0 + 3.0 + 2.0, (reached, exited)   # SIGTERM ignored
    assert verify_events(ctx.run_dir / "events.jsonl").ok


MANY_FILES = r"""
python3 - <<'PY'
import os
os.makedirs("many/agent", exist_ok=True)
for i in range(1000):
    open(f"many/agent/f{i}.py", "w").close()
PY
echo created
sleep 300
"""


def _create_files(root: Path, dirs: int, per_dir: int) -> None:
    for d in range(dirs):
        folder = root / f"d{d}"
        folder.mkdir(parents=True)
        fd = os.open(folder, os.O_DIRECTORY)
        try:
            for i in range(per_dir):
                os.close(os.open(f"f{i}.py", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
        finally:
            os.close(fd)


@pytest.mark.slow
def test_150000_files_do_not_delay_the_deadline(tmp_path):
    """150,000 small files in the workspace (made in memory-backed storage where there is one,
    so the test spends its time on the run, not on the disk), periodic snapshots every second:
    the agent is still stopped at its deadline."""
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() and os.access(shm, os.W_OK) \
        else tmp_path
    try:
        agent = make_agent(base, "many-files", MANY_FILES)
        ctx = prepare(base, agent, "15s")
        _create_files(ctx.run_dir / "workspace" / "many", 150, 1000)
        started = time.monotonic()
        summary = run_mod.execute(ctx, report=lambda _: None)
        assert summary["status"] == "no_submission"
        assert "created" in (ctx.run_dir / "logs" / "agent.log").read_text()
        reached, exited = deadline_timing(ctx.run_dir)
        assert reached < 2.0 and exited < 2.5, (reached, exited)
        skipped = (ctx.run_dir / "snapshots.git" / "a2c-skipped.jsonl").read_text()
        assert "more than" in skipped
        assert time.monotonic() - started < 60
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


SECRET_PRINTER = r"""
echo "my key is $ADV_PROVIDER_API_KEY"
echo "$ADV_PROVIDER_API_KEY" > key_notes.py
echo "cmd $ADV_PROVIDER_API_KEY" >> "$A2C_COMMAND_LOG"
bash -c "true $ADV_PROVIDER_API_KEY"
sleep 3
echo "done"
"""


@pytest.mark.slow
def test_passed_secret_is_redacted_from_logs_and_snapshots(tmp_path, monkeypatch):
    value = "sk-adv-" + secrets.token_hex(12)
    monkeypatch.setenv("ADV_PROVIDER_API_KEY", value)
    agent = make_agent(tmp_path, "secret-printer", SECRET_PRINTER,
                       pass_env=["ADV_PROVIDER_API_KEY"])
    ctx = prepare(tmp_path, agent, "30s")
    summary = run_mod.execute(ctx, report=lambda _: None)
    assert summary["status"] == "no_submission"
    logs = ctx.run_dir / "logs"
    agent_log = (logs / "agent.log").read_text()
    assert "my key is [redacted:ADV_PROVIDER_API_KEY]" in agent_log   # it was printed
    for name in ("agent.log", "commands.log", "transcript.log"):
        assert value not in (logs / name).read_text(), name
    git = subprocess.run(["git", f"--git-dir={ctx.run_dir / 'snapshots.git'}", "log", "-p",
                          "--all"], capture_output=True, text=True, check=True).stdout
    assert "key_notes.py" in git and value not in git
    assert not (ctx.run_dir / "snapshots.git" / "a2c-redact.json").exists()
    leftovers = [p for p in ctx.run_dir.rglob("*") if p.is_file() and not p.is_symlink()
                 and "workspace" not in p.relative_to(ctx.run_dir).parts
                 and value.encode() in p.read_bytes()]
    assert leftovers == []
