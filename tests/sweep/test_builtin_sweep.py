"""The `builtin` suite on a local Ray with 2 CPUs, end to end (slow; CI runs it):

1. the sweep is killed mid-trial — the driver, Ray and the trial's `a2c run` — after its first
   trial finished;
2. `a2c sweep` again finishes the grid: the finished trial is skipped (its record untouched), the
   killed one is resumed (`a2c run --resume`), the rest run; the leaderboard shows mean and spread
   over the seeds; `a2c view` renders the folder in headless Chromium;
3. `a2c sweep` a third time does no work.
A second test: a trial whose agent crashes is a failed trial with its reason, never a score, and
the other trial of the sweep still finishes.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
pytest.importorskip("ray")


def sweep(*args, **kw) -> subprocess.Popen:
    env = {**os.environ, "COLUMNS": "200", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.Popen([sys.executable, "-m", "a2c.cli", "sweep", *map(str, args)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True, **kw)


def finish(proc: subprocess.Popen, timeout: float = 400) -> str:
    out, _ = proc.communicate(timeout=timeout)
    return out


def run_info(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def trial_ids() -> list[str]:
    suite = json.loads((REPO / "generated" / "suites" / "builtin" / "suite.json").read_text())
    return [t["id"] for t in suite["suite"]["trials"]]


def pids_running(trial_id: str) -> list[int]:
    """The processes of one trial's `a2c run` (found by its --run-id on the command line)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--run-id" in cmd and trial_id.encode() in cmd:
            found.append(int(proc.name))
    return found


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_builtin_suite_killed_and_resumed(tmp_path):
    runs = tmp_path / "runs"
    ids = trial_ids()
    first, second = runs / ids[0], runs / ids[1]
    assert ids[0].startswith("arith-ref-sft-") and ids[1].startswith("arith-ref-sft-")
    start = time.monotonic()
    proc = sweep("builtin", "--runs-dir", runs, "--max-concurrent", "1", "--num-cpus", "2")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if run_info(first).get("status") == "finished" and \
                run_info(second).get("agent_started_at") and pids_running(ids[1]):
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.5)
    else:
        pytest.fail("the second trial never started")
    time.sleep(3)                                   # well inside its agent's run
    for pid in pids_running(ids[1]):
        os.kill(pid, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert run_info(second)["status"] == "running"  # died mid-run
    before = digest(first / "events.jsonl")
    print(f"killed after {time.monotonic() - start:.0f}s")

    # While a sweep is unfinished, a2c view says so and the page reloads itself.
    from a2c.analysis.view import collect, render_view
    live = collect(runs)
    assert live.live and live.counts.get("running") == 1
    assert 'http-equiv="refresh"' in render_view(runs)

    t0 = time.monotonic()
    out = finish(sweep("builtin", "--runs-dir", runs, "--max-concurrent", "2",
                       "--num-cpus", "2"))
    second_s = time.monotonic() - t0
    print(f"second sweep: {second_s:.0f}s")
    record = json.loads((runs / "sweep.json").read_text())
    assert record["counts"] == {"queued": 0, "running": 0, "finished": 6, "failed": 0}, out
    assert ids[0] not in record["ran"] and set(record["ran"]) == set(ids[1:]), out
    assert digest(first / "events.jsonl") == before and run_info(first)["resumes"] == 0
    assert run_info(second)["resumes"] == 1 and run_info(second)["status"] == "finished"
    assert f"resuming {ids[1]}" in out
    by_id = {t["id"]: t for t in record["trials"]}
    assert by_id[ids[0]]["skipped"] and not by_id[ids[1]]["skipped"]

    # The leaderboard: one row per agent x task, mean and spread over the two seeds.
    board = (runs / "leaderboard.csv").read_text().splitlines()
    header = board[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in board[1:]]
    assert {(r["agent"], r["task"], r["runs"]) for r in rows} == {
        ("ref-sft", "arith", "2"), ("ref-copy", "arith", "2"), ("ref-copy", "textquest", "2")}
    assert all(r["best_std"] != "" and r["improvement_std"] != "" for r in rows)
    md = (runs / "leaderboard.md").read_text()
    assert "±" in md and (runs / "leaderboard.html").is_file()

    # a2c view: the folder in one page, in a real browser.
    view = subprocess.run([sys.executable, "-m", "a2c.cli", "view", runs], cwd=REPO,
                          capture_output=True, text=True, check=True)
    page = Path(view.stdout.strip())
    html = page.read_text()
    assert html.count('data-status="finished"') == 6 and 'http-equiv="refresh"' not in html
    for trial in ids:
        assert (runs / trial / "report" / "report.html").is_file()
        assert f'href="{trial}/report/report.html"' in html
    chromium_page = _chromium()
    if chromium_page is not None:
        check = chromium_page.open_page(page)
        assert check.dom.count('data-status="finished"') == 6
        assert 'id="leaderboard"' in check.dom
        assert not [m for m in check.console if "error" in m.lower()], check.console

    # A third sweep does no work: no Ray, no run.
    print(f"view and checks done at {time.monotonic() - start:.0f}s")
    t0 = time.monotonic()
    out = finish(sweep("builtin", "--runs-dir", runs))
    assert json.loads((runs / "sweep.json").read_text())["ran"] == [], out
    assert "6 finished, 0 failed, 0 run now" in out
    assert time.monotonic() - t0 < min(20, second_s)


def _chromium():
    import importlib.util
    path = REPO / "tests" / "analysis" / "chromium_page.py"
    spec = importlib.util.spec_from_file_location("a2c_sweep_chromium_page", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module           # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module if module.chromium() else None


CRASH_AGENT = """apiVersion: a2c/v1
kind: Agent
id: crash
title: An agent that crashes at once
type: reference
launch:
  command: >-
    python -c "import sys; print('simulated crash: out of memory', file=sys.stderr); sys.exit(3)"
driver: {required: false}
transcript: {source: stdout, format: text, ext: log}
"""


def test_a_failed_trial_is_failed_with_its_reason_and_the_others_finish(tmp_path):
    import shutil
    specs = tmp_path / "specs"
    shutil.copytree(REPO / "specs", specs)
    (specs / "agents" / "crash.yaml").write_text(CRASH_AGENT)
    (specs / "suites" / "crashy.yaml").write_text(
        "apiVersion: a2c/v1\nkind: Suite\nid: crashy\ntitle: One crash, one copy\n"
        "tasks: [arith]\nagents: [crash, ref-copy]\nbase_model: tiny\n"
        "budget: {wall_clock: 40s, cpus: 0.5, eval_cpus: 0.5}\n")
    runs = tmp_path / "runs"
    out = finish(sweep(specs / "suites" / "crashy.yaml", "--runs-dir", runs,
                       "--max-concurrent", "2", "--num-cpus", "2"))
    record = json.loads((runs / "sweep.json").read_text())
    by_agent = {t["agent"]: t for t in record["trials"]}
    assert by_agent["ref-copy"]["status"] == "finished", out
    crash = by_agent["crash"]
    assert crash["status"] == "failed" and crash["best_score"] is None, out
    assert crash["reason"].startswith("agent failed (exit 3"), crash
    assert "simulated crash" in crash["reason"], crash
    board = (runs / "leaderboard.md").read_text()
    assert "| crash |" not in board and "failed trial: agent failed" in board
    assert "| ref-copy |" in board
