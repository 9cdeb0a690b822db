"""The recorder hook logs the agent's commands (bash -c, scripts), once, without noise."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from a2c.compiler.build import build_specs

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _run(script: str, env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=30, check=False)


def test_bash_logging_hook(specs, tmp_path):
    (root,) = build_specs([specs / "tasks" / "tiny.yaml"], tmp_path / "out")
    log = tmp_path / "commands.log"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "A2C_COMMAND_LOG": str(log),
           "BASH_ENV": str(root / "hooks" / "bash_logging.sh")}
    proc = _run('cd /tmp && echo one\nbash -c "echo nested"\nfalse || echo two', env, tmp_path)
    assert proc.returncode == 0 and proc.stdout.split() == ["one", "nested", "two"]
    lines = [ln.split("\t") for ln in log.read_text().splitlines()]
    assert [ln[2] for ln in lines] == ["cd /tmp", "echo one", 'bash -c "echo nested"', "false",
                                       "echo two"]
    assert lines[0][1] == str(tmp_path) and lines[1][1] == "/tmp"
    assert all(len(ln) == 3 and ln[0].endswith("Z") for ln in lines)
    # A failing log never makes a command fail; no log variable, no logging.
    env["A2C_COMMAND_LOG"] = "/nonexistent/dir/log"
    assert _run("echo ok", env, tmp_path).stdout == "ok\n"
