"""The grading client as a reference agent uses it: submit a model, wait for its score, record
the hyperparameters the submission's snapshot carries.

Submissions go through the workspace's grading client (`$A2C_WORKSPACE/a2c_client.py`, run as a
command), exactly as an LLM agent's would: the agent imports no grading code.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from a2c.agents.kit.context import AgentContext, log


def _client_cmd(ctx: AgentContext, *args: str) -> list[str]:
    return [sys.executable, str(ctx.workspace / "a2c_client.py"), *args, "--json"]


def _parse(out: str) -> dict:
    out = out.strip()
    try:
        value = json.loads(out)
        return value if isinstance(value, dict) else {"value": value}
    except ValueError:
        pass
    for line in reversed(out.splitlines()):  # last JSON line
        try:
            value = json.loads(line)
            if isinstance(value, dict):
                return value
        except ValueError:
            continue
    match = re.search(r"\bsubmission (\d+)", out) or re.search(r"\bid\W+(\w+)", out)
    return {"id": match.group(1), "raw": out} if match else {"raw": out}


def client(ctx: AgentContext, *args: str, timeout: float = 600) -> tuple[int, dict]:
    proc = subprocess.run(_client_cmd(ctx, *args), capture_output=True, text=True,
                          timeout=timeout, cwd=ctx.workspace)
    return proc.returncode, _parse(proc.stdout or proc.stderr)


HYPERPARAMETERS_FILE = "hyperparameters.json"
_SUBMITTED: list[Path] = []     # this process's submitted model folders, oldest first


def record_hyperparameters(ctx: AgentContext, **values) -> Path:
    """Write the values the last training actually used (`$A2C_WORKSPACE/hyperparameters.json`;
    `steps` is what ran, `max_steps` what was planned) before submitting, so the submission's
    code snapshot carries them and the report shows these rather than what the source says."""
    path = ctx.workspace / HYPERPARAMETERS_FILE
    path.write_text(json.dumps(values, sort_keys=True) + "\n", encoding="utf-8")
    log("hyperparameters: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())),
        event="hyperparameters", values=values)
    return path


def submit(ctx: AgentContext, model_dir: Path, note: str = "") -> str | None:
    """Submit `model_dir`; once the grader has acknowledged it (it has its own copy then), the
    folders this agent submitted before are removed, so the agent's output holds one model."""
    rc, reply = client(ctx, "submit", str(model_dir), "--note", note)
    log(f"submit {model_dir.name}: rc={rc} {reply}", event="submit", rc=rc, reply=reply)
    if rc != 0 or reply.get("id") is None:
        return None
    release_submitted(keep=model_dir)
    return str(reply["id"])


def release_submitted(keep: Path | None = None) -> None:
    """Remove the earlier submitted folders but `keep` (the grader copied each at submit)."""
    import shutil
    for folder in [f for f in _SUBMITTED if keep is None or f.resolve() != keep.resolve()]:
        shutil.rmtree(folder, ignore_errors=True)
        _SUBMITTED.remove(folder)
    if keep is not None and keep not in _SUBMITTED:
        _SUBMITTED.append(keep)


def remember_submitted(folder: Path) -> None:
    """A folder submitted by another process (the SFT warm-up's): removed at the next submit."""
    _SUBMITTED.append(Path(folder))


def wait_score(ctx: AgentContext, submission_id: str, timeout: float | None = None) -> dict:
    timeout = max(5.0, ctx.remaining() - 2) if timeout is None else timeout
    try:
        rc, reply = client(ctx, "wait", submission_id, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"id": submission_id, "status": "timeout"}
    log(f"submission {submission_id}: {reply.get('status')} score={reply.get('score')}",
        event="score", reply=reply)
    return reply
