"""Issue 31: a reference agent that has finished is gone before the deadline. It stops waiting
for scores `EXIT_MARGIN_S` before the deadline (the grader scores them after it exits) and leaves
with `os._exit` once its output is flushed: the interpreter's teardown with torch, transformers
and TRL loaded took 2.5 s here, and the runtime's deadline killed an agent 2 s after its log said
"done" (the record said `deadline`, not `exited`)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from a2c.agents import reference
from a2c.agents.kit import grading
from a2c.paths import project_root

SLOW_TEARDOWN = "import atexit, time; atexit.register(time.sleep, 30); "


def _python(code: str, env: dict | None = None, timeout: float = 60) -> tuple[int, str, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout, time.monotonic() - started


def test_exit_promptly_flushes_and_skips_the_teardown():
    rc, out, took = _python(SLOW_TEARDOWN + "import sys; sys.stdout.write('done, unflushed'); "
                            "from a2c.agents.reference import exit_promptly; exit_promptly(3)")
    assert rc == 3 and out == "done, unflushed"
    assert took < 15, f"the slow atexit handler ran ({took:.1f}s)"


def test_the_sft_agent_exits_through_exit_promptly(tmp_path):
    """`python -m a2c.agents.reference.sft` itself: its return code, with no teardown (a slow
    atexit handler stands for torch's)."""
    env = {"A2C_WORKSPACE": str(tmp_path), "A2C_DATA_DIR": str(tmp_path),
           "A2C_BASE_MODEL": str(tmp_path), "A2C_MODE": "rl-only",   # it returns 3 at once
           "A2C_DEADLINE": str(time.time() + 600)}
    rc, out, took = _python(SLOW_TEARDOWN + "import runpy; runpy.run_module("
                            "'a2c.agents.reference.sft', run_name='__main__')", env=env)
    assert rc == 3 and "rl-only forbids plain SFT" in out
    assert took < 15, f"the agent went through the interpreter's teardown ({took:.1f}s)"


def test_every_reference_agent_ends_with_exit_promptly():
    folder = project_root() / "agents" / "reference"
    mains = 0
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                mains += 1
                body = ast.unparse(node)
                assert "exit_promptly(main())" in body, f"{path.name}: {body}"
                assert "sys.exit" not in body and "SystemExit" not in body, path.name
    assert mains >= 6


class _Ctx:
    def __init__(self, left: float):
        self.deadline = time.time() + left

    def remaining(self) -> float:
        return self.deadline - time.time()


@pytest.mark.parametrize("left, waited", [(120.0, True), (10.5, False), (-3.0, False)])
def test_wait_scores_stops_before_the_deadline(monkeypatch, capsys, left, waited):
    calls = []

    def fake_wait(ctx, sid, timeout=None):
        calls.append((sid, timeout))
        return {"id": sid, "status": "scored", "score": 50.0}
    monkeypatch.setattr(grading, "wait_score", fake_wait)
    monkeypatch.delenv("A2C_WORKSPACE", raising=False)
    replies = reference.wait_scores(_Ctx(left), ["1", "2"])
    if waited:
        assert [sid for sid, _ in calls] == ["1", "2"]
        for _, timeout in calls:   # never past EXIT_MARGIN_S before the deadline
            assert timeout is not None and left - reference.EXIT_MARGIN_S - 1 < timeout \
                <= left - reference.EXIT_MARGIN_S
        assert [r["status"] for r in replies] == ["scored", "scored"]
    else:
        assert calls == []
        assert [r["status"] for r in replies] == ["not_awaited", "not_awaited"]
        assert "not waiting for its score" in capsys.readouterr().out


def test_a_timed_out_wait_says_the_grader_scores_it_later(monkeypatch, capsys):
    monkeypatch.setattr(grading, "wait_score",
                        lambda ctx, sid, timeout=None: {"id": sid, "status": "timeout"})
    monkeypatch.delenv("A2C_WORKSPACE", raising=False)
    assert reference.wait_scores(_Ctx(60), ["4"])[0]["status"] == "timeout"
    assert "stopped waiting 10s before the deadline" in capsys.readouterr().out


def test_the_agents_wait_through_wait_scores():
    """No reference agent waits for a score with the kit's default time-out (the deadline less
    2 s), which left its exit 2 s."""
    for name in ("sft", "grpo", "l3_rl", "l3_sft"):
        source = (Path(reference.__file__).parent / f"{name}.py").read_text(encoding="utf-8")
        assert "wait_scores(ctx, " in source, name
        assert "grading.wait_score(" not in source, name
