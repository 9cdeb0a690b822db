"""The agent's grading client (templates/task/workspace/a2c_client.py.j2) against a live service,
over the Unix socket and over TCP, and its shell wrappers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from service_helpers import make_model

from a2c.paths import TEMPLATES_DIR

WORKSPACE_TEMPLATES = TEMPLATES_DIR / "task" / "workspace"
CLIENT_FILES = ("a2c_client.py", "submit", "status", "time")


def render(name: str) -> str:
    """Render as the compiler does (StrictUndefined, no context): the client needs no variables."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False)
    return env.get_template(f"task/workspace/{name}.j2").render()


@pytest.fixture
def workspace_with_client(tmp_path):
    def install(ws: Path) -> Path:
        for name in CLIENT_FILES:
            path = ws / name
            path.write_text(render(name))
            path.chmod(0o755)
        return ws
    return install


def run_client(ws: Path, *args: str, url: str | None, token: str | None, wrapper: str | None = None,
               timeout: float = 60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("A2C_")}
    if url is not None:
        env["A2C_GRADER_URL"] = url
    if token is not None:
        env["A2C_TOKEN"] = token
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    cmd = [str(ws / wrapper), *args] if wrapper else [sys.executable, str(ws / "a2c_client.py"),
                                                      *args]
    return subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=timeout)


def test_templates_render_to_themselves_and_are_stdlib_only():
    for name in CLIENT_FILES:
        source = (WORKSPACE_TEMPLATES / f"{name}.j2").read_text()
        assert render(name) == source
    client = render("a2c_client.py")
    assert "import a2c" not in client and "from a2c" not in client
    compile(client, "a2c_client.py", "exec")
    for name in ("submit", "status", "time"):
        assert render(name).startswith("#!/usr/bin/env bash")
        assert f"a2c_client.py\" {name} " in render(name)


def test_help_works_without_a_server(tmp_path, workspace_with_client):
    ws = workspace_with_client(tmp_path)
    for args in (["--help"], ["submit", "--help"], ["status", "--help"], ["wait", "--help"]):
        proc = run_client(ws, *args, url=None, token=None)
        assert proc.returncode == 0, proc.stderr
        assert "usage" in proc.stdout.lower()
    proc = run_client(ws, url=None, token=None)
    assert proc.returncode == 2
    proc = run_client(ws, "time", url=f"unix:{tmp_path}/nothing.sock", token="x")
    assert proc.returncode == 3 and "cannot reach the grader" in proc.stderr
    proc = run_client(ws, "--help", url=None, token=None, wrapper="submit")
    assert proc.returncode == 0 and "submit" in proc.stdout


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_client_round_trip(service, workspace_with_client, transport):
    handle, run = service(max_submissions=3)
    ws = workspace_with_client(run / "workspace")
    url = handle.unix_url if transport == "unix" else handle.url
    make_model(ws / "output" / "ckpt", SCORE=64)

    proc = run_client(ws, "submit", "output/ckpt", "--note", "first try", url=url,
                      token=handle.token)
    assert proc.returncode == 0, proc.stderr
    assert "submission 1" in proc.stdout
    proc = run_client(ws, "wait", "1", "--json", url=url, token=handle.token)
    assert proc.returncode == 0, proc.stderr
    sub = json.loads(proc.stdout)
    assert sub["status"] == "scored" and sub["score"] == 64.0 and sub["note"] == "first try"

    proc = run_client(ws, "status", "1", url=url, token=handle.token)
    assert proc.returncode == 0 and "64.00" in proc.stdout and "scored" in proc.stdout
    proc = run_client(ws, "list", url=url, token=handle.token)
    assert "best: submission 1 with 64.00" in proc.stdout and "submissions left: 2" in proc.stdout
    proc = run_client(ws, url=url, token=handle.token, wrapper="status")
    assert proc.returncode == 0 and "64.00" in proc.stdout
    proc = run_client(ws, "--json", url=url, token=handle.token, wrapper="time")
    data = json.loads(proc.stdout)
    assert data["submissions_left"] == 2 and data["remaining_s"] > 0
    proc = run_client(ws, url=url, token=handle.token, wrapper="time")
    assert "time left:" in proc.stdout and "submissions left: 2" in proc.stdout

    # The wrapper with --wait: a second (duplicate) submission.
    proc = run_client(ws, "output/ckpt", "--wait", url=url, token=handle.token, wrapper="submit")
    assert proc.returncode == 0, proc.stderr
    assert "identical weights to submission 1" in proc.stdout


def test_client_refusals_are_clear(service, workspace_with_client, tmp_path):
    handle, run = service(max_submissions=1)
    ws = workspace_with_client(run / "workspace")
    make_model(ws / "output" / "m")
    proc = run_client(ws, "time", url=handle.url, token="wrong")
    assert proc.returncode == 1 and "unauthorized" in proc.stderr and "A2C_TOKEN" in proc.stderr
    proc = run_client(ws, "submit", str(tmp_path), url=handle.url, token=handle.token)
    assert proc.returncode == 1 and "path_escape" in proc.stderr
    assert "/workspace/output" in proc.stderr
    proc = run_client(ws, "submit", "../../..", url=handle.url, token=handle.token)
    assert proc.returncode == 1 and "path_escape" in proc.stderr
    assert run_client(ws, "submit", "output/m", url=handle.url, token=handle.token).returncode == 0
    proc = run_client(ws, "submit", "output/m", "--json", url=handle.url, token=handle.token)
    assert proc.returncode == 1
    assert "submission_limit" in proc.stderr and "[limit: 1]" in proc.stderr
    body = json.loads(proc.stdout)
    assert body["status"] == 429 and body["error"] == "submission_limit" and body["limit"] == 1
    proc = run_client(ws, "status", "7", url=handle.url, token=handle.token)
    assert proc.returncode == 1 and "not_found" in proc.stderr


def test_client_deadline_and_interval_messages(service, workspace_with_client):
    import time

    handle, run = service(deadline_unix=time.time() - 1)
    ws = workspace_with_client(run / "workspace")
    make_model(ws / "output" / "m")
    proc = run_client(ws, "submit", "output/m", url=handle.url, token=handle.token)
    assert proc.returncode == 1 and "deadline_passed" in proc.stderr and "UTC" in proc.stderr
    handle2, run2 = service(min_interval_s=120)
    ws2 = workspace_with_client(run2 / "workspace")
    make_model(ws2 / "output" / "m")
    proc = run_client(ws2, "submit", "output/m", url=handle2.url, token=handle2.token)
    assert proc.returncode == 0
    proc = run_client(ws2, "submit", "output/m", url=handle2.url, token=handle2.token)
    assert proc.returncode == 1 and "too_soon" in proc.stderr and "120 s between" in proc.stderr
