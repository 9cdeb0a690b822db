"""The per-run grader token kept out of the record (issue 23, point 6): an agent printed its token
and it stayed in agent.log, the transcript, the snapshots and a 0644 workspace file. Now the
token is redacted like a provider key, from the logs, every snapshot and the agent's folders the
run keeps."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from scripted_agents import make_agent

from a2c.runtime import run as run_mod
from a2c.runtime.redact import redact_tree
from a2c.runtime.snapshots import Snapshotter


def test_redact_tree_scrubs_agent_files_and_follows_nothing(tmp_path):
    token = "tok-" + os.urandom(12).hex()
    ws = tmp_path / "workspace"
    (ws / "notes").mkdir(parents=True)
    (ws / "notes" / "token.txt").write_text(f"my token: {token}\n")
    os.chmod(ws / "notes" / "token.txt", 0o644)
    (ws / "clean.py").write_text("print('hi')\n")
    outside = tmp_path / "outside.txt"
    outside.write_text(token)
    (ws / "link.txt").symlink_to(outside)
    (ws / "big.txt").write_text(token + "x" * 200)
    found, files = redact_tree(ws, {"A2C_TOKEN": token}, max_bytes=100)
    assert found == 1 and files == ["notes/token.txt"]
    text = (ws / "notes" / "token.txt").read_text()
    assert token not in text and "[redacted:A2C_TOKEN]" in text
    assert oct((ws / "notes" / "token.txt").stat().st_mode & 0o777) == "0o644"
    assert outside.read_text() == token                 # the link was not followed
    assert redact_tree(ws, {}) == (0, [])


def test_snapshot_never_commits_the_token(tmp_path):
    token = "tok-" + os.urandom(12).hex()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "submit.sh").write_text(f"curl -H 'Authorization: Bearer {token}' ...\n")
    snap = Snapshotter(tmp_path / "s.git", ws, secrets={"A2C_TOKEN": token})
    snap.snapshot("periodic")
    log = subprocess.run(["git", f"--git-dir={tmp_path / 's.git'}", "log", "-p", "--all"],
                         capture_output=True, text=True, check=True).stdout
    assert token not in log and "[redacted:A2C_TOKEN]" in log


TOKEN_PRINTER = r"""
echo "my grader token is $A2C_TOKEN"
echo "TOKEN = '$A2C_TOKEN'" > token_notes.py
chmod 0644 token_notes.py
mkdir -p notes && echo "$A2C_TOKEN" > notes/token.txt
echo "$A2C_TOKEN" > "${TMPDIR:-/tmp}/token.txt" 2>/dev/null || true
echo "$A2C_TOKEN" > "$HOME/token.txt" 2>/dev/null || true
bash -c "true $A2C_TOKEN"
sleep 3
echo "done"
"""


@pytest.mark.slow
def test_printed_and_written_token_is_nowhere_in_the_record(tmp_path):
    agent = make_agent(tmp_path, "token-printer", TOKEN_PRINTER)
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="30s",
                              runs_dir=tmp_path / "runs", snapshot_every_s=1)
    ctx = run_mod.prepare(opts, report=lambda _: None)
    token = (ctx.run_dir / "grader" / "token").read_text().strip()
    run_mod.execute(ctx, report=lambda _: None)
    run_dir = ctx.run_dir
    agent_log = (run_dir / "logs" / "agent.log").read_text()
    assert "my grader token is [redacted:A2C_TOKEN]" in agent_log   # it was printed
    notes = (run_dir / "workspace" / "token_notes.py").read_text()
    assert "[redacted:A2C_TOKEN]" in notes                           # and written
    git = subprocess.run(["git", f"--git-dir={run_dir / 'snapshots.git'}", "log", "-p",
                          "--all"], capture_output=True, text=True, check=True).stdout
    assert "token_notes.py" in git and token not in git
    # every file of the run dir but the grader's own 0600 folder (the token file itself)
    leftovers = [p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*")
                 if p.is_file() and not p.is_symlink()
                 and p.relative_to(run_dir).parts[0] != "grader"
                 and token.encode() in p.read_bytes()]
    assert leftovers == []
    assert not (run_dir / "snapshots.git" / "a2c-redact.json").exists()


def test_the_runner_counts_the_grader_token_as_a_secret(tmp_path):
    """Without a real run: the runner's secrets name the grader token (so snapshots read it from
    a2c-redact.json during the run and redact_logs scrubs the logs and folders at the end)."""
    agent = make_agent(tmp_path, "quiet", "true\n")
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny", budget="30s",
                              runs_dir=tmp_path / "runs", snapshot_every_s=1)
    ctx = run_mod.prepare(opts, report=lambda _: None)
    from a2c.runtime.run.runner import Runner
    runner = Runner(ctx, report=lambda _: None)
    token = Path(ctx.run_dir / "grader" / "token").read_text().strip()
    assert runner.secrets.get("A2C_TOKEN") == token
    (ctx.paths.workspace / "leak.txt").write_text(token)
    (ctx.paths.logs / "agent.log").write_text(f"token {token}\n")
    from a2c.runtime.run.ending import redact_logs
    redact_logs(ctx.paths, runner.secrets, lambda _: None)
    assert token not in (ctx.paths.workspace / "leak.txt").read_text()
    assert token not in (ctx.paths.logs / "agent.log").read_text()
