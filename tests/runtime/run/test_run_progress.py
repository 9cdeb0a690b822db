"""Issue 31: what a run prints while it runs. The baseline says "cached" only when it came from
the cache; the agent's first call to its driver and a periodic heartbeat (elapsed, driver use,
submissions) come from what the runtime and the gateway record, for a scaffold as for a
reference agent; submissions received and scored show for a scaffold too."""

from __future__ import annotations

import time

import pytest
from driver_helpers import FakeUpstream, configure_fake_provider, make_cli_agent

from a2c.runtime import run as run_mod
from a2c.runtime.run import runner as runner_mod
from a2c.runtime.run.progress import DriverUse, first_call_line, heartbeat_line
from a2c.runtime.run.runner import Runner
from a2c.runtime.run.scoring import RunScores
from a2c.runtime.sandbox.local import bwrap_works


def _prepare(tmp_path, agent="ref-sft", **kw):
    opts = run_mod.RunOptions(bundle="arith", agent=str(agent), model="tiny",
                              budget=kw.pop("budget", "60s"), runs_dir=tmp_path / "runs", **kw)
    return run_mod.prepare(opts, report=lambda _: None)


# ----------------------------------------------------------------------------- lines
def test_heartbeat_line_names_time_driver_use_and_submissions():
    none = RunScores()
    assert heartbeat_line(60, 240, none) == "agent running 1m00s of 4m00s: no submission yet"
    usage = {"calls": 0, "tokens": 0, "cost_usd": 0.0, "errors": 0, "exhausted": None}
    assert heartbeat_line(61.4, 600, none, DriverUse.of(usage)) == \
        "agent running 1m01s of 10m00s: no driver call yet; no submission yet"
    usage = {"calls": 14, "tokens": 210_400, "cost_usd": 0.1234, "errors": 2,
             "exhausted": {"limit": "tokens"}}
    scores = RunScores(submissions=2, scored=1, best_score=63.0)
    assert heartbeat_line(120, 600, scores, DriverUse.of(usage)) == (
        "agent running 2m00s of 10m00s: 14 driver calls, 210,400 tokens, $0.1234, 2 error(s), "
        "driver budget spent; 2 submissions (1 scored, best 63.0)")
    one = {"calls": 1, "tokens": 18, "cost_usd": 0.0}
    assert heartbeat_line(5, 60, RunScores(submissions=1), DriverUse.of(one)) == \
        "agent running 5s of 1m00s: 1 driver call, 18 tokens; 1 submission (0 scored)"


def test_first_call_line_names_the_model_or_the_refusal():
    ok = {"seq": 1, "calls": 1, "tokens": 18, "errors": 0, "model": "claude-sonnet-4-5",
          "by_model": {"claude-sonnet-4-5-20250929": {"calls": 1}}}
    assert first_call_line(DriverUse.of(ok)) == \
        "driver: the agent's first call reached claude-sonnet-4-5-20250929 (18 tokens so far)"
    refused = {"seq": 1, "calls": 0, "errors": 1, "model": "claude-sonnet-4-5", "by_model": {}}
    assert first_call_line(DriverUse.of(refused)) == ("driver: the agent's first call to claude-sonnet-4-5 "
                                        "was refused or failed (1 error(s); "
                                        "logs/driver-gateway.log)")


# ----------------------------------------------------------------------------- baseline
@pytest.mark.parametrize("cached", [False, True])
def test_baseline_says_cached_only_when_it_came_from_the_cache(tmp_path, monkeypatch, cached):
    """A computed baseline is announced (it takes a while) and never called cached; a cache hit
    is one line that says so, with no "scoring the base model" before it."""
    from a2c.runtime.grader_service import baseline as baseline_mod
    ctx = _prepare(tmp_path)

    def fake(run_dir, use_cache=True):
        if not cached:
            time.sleep(0.6)    # an evaluation
        return baseline_mod.BaselineSummary(valid=True, score=0.0, cached=cached,
                                            elapsed_s=0.6 if not cached else 0.01)
    monkeypatch.setattr(baseline_mod, "compute_baseline_for_run", fake)
    monkeypatch.setattr(runner_mod, "BASELINE_ANNOUNCE_S", 0.2)
    lines: list[str] = []
    Runner(ctx, lines.append).baseline()
    result = [line for line in lines if line.startswith("baseline score")]
    assert len(result) == 1, lines
    if cached:
        assert result[0].startswith("baseline score 0.0 (cached: scored by an earlier run")
        assert not any("scoring the base model" in line for line in lines), lines
    else:
        assert result[0] == "baseline score 0.0 (scored in 1s)"
        assert "cached" not in result[0]
        assert lines[0].startswith("scoring the base model"), lines
    assert ctx.run.baseline_score == 0.0


@pytest.mark.slow
def test_baseline_computed_then_cached_for_real(tmp_path, monkeypatch):
    """The real evaluation with an empty cache: not "cached"; the next run of the same task,
    model and grader: "cached"."""
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "cache"))
    seen = []
    for n in range(2):
        ctx = _prepare(tmp_path / str(n))
        lines: list[str] = []
        Runner(ctx, lines.append).baseline()
        seen.append(lines)
    first, second = ([line for line in lines if line.startswith("baseline score")][0]
                     for lines in seen)
    assert "cached" not in first and first.startswith("baseline score 0.0 (scored in"), seen
    assert "(cached: scored by an earlier run" in second, seen
    assert any(line.startswith("scoring the base model") for line in seen[0]), seen
    assert not any(line.startswith("scoring the base model") for line in seen[1]), seen


# ----------------------------------------------------------------------------- a scaffold run
SCAFFOLD = r"""
sleep 3
python3 - <<'PY'
import json, os, socket
body = json.dumps({"model": os.environ["A2C_DRIVER_MODEL"], "max_tokens": 16,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
head = ("POST /v1/messages HTTP/1.1\r\nHost: gateway\r\nx-api-key: %s\r\n"
        "anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n"
        "content-length: %d\r\nconnection: close\r\n\r\n" % (os.environ["A2C_DRIVER_KEY"],
                                                             len(body)))
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(os.environ["A2C_DRIVER_SOCKET"])
s.sendall(head.encode() + body)
while s.recv(65536):
    pass
PY
sleep 4
cp -r "$A2C_BASE_MODEL" "$A2C_OUTPUT_DIR/copy"
python3 a2c_client.py submit "$A2C_OUTPUT_DIR/copy" --note copy
python3 a2c_client.py wait 1
sleep 3
"""


@pytest.mark.slow
@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap not available")
def test_a_scaffold_run_reports_its_first_driver_call_heartbeats_and_submissions(tmp_path,
                                                                                  monkeypatch):
    with FakeUpstream() as upstream:
        configure_fake_provider(monkeypatch, upstream.port)
        agent = make_cli_agent(tmp_path, "progress-cli", SCAFFOLD)
        ctx = _prepare(tmp_path, agent, budget="90s", driver="fake/claude-sonnet-4-5")
        ctx.run.options.heartbeat_every_s = 1.5
        lines: list[str] = []
        stamped: list[tuple[float, str]] = []

        def report(line):
            lines.append(line)
            stamped.append((time.monotonic(), line))
        summary = run_mod.execute(ctx, report=report)
    assert summary["status"] == "finished", lines
    text = "\n".join(lines)

    def at(prefix):
        return next(i for i, line in enumerate(lines) if line.startswith(prefix))
    first = at("driver: the agent's first call reached claude-sonnet-4-5")
    assert "(18 tokens so far)" in lines[first]
    exited = at("agent exited (exited, rc 0)")
    beats = [i for i, line in enumerate(lines) if line.startswith("agent running ")]
    # a heartbeat before the call says so, one after it counts it, then the submission
    assert any(i < first and "no driver call yet; no submission yet" in lines[i]
               for i in beats), text
    assert any(first < i < exited and ": 1 driver call, 18 tokens" in lines[i]
               for i in beats), text
    assert any("1 submission (1 scored, best 0.0)" in lines[i] for i in beats), text
    assert at("submission 1 received") < at("submission 1 scored 0.0") < exited, text
    # announced while the agent ran (the loop reads the gateway's totals every 2 s), before
    # the submission it made 4 s after the call, not at the end
    assert first < at("submission 1 received")
    # at most one heartbeat per interval
    times = [stamped[i][0] for i in beats]
    assert all(b - a >= 1.4 for a, b in zip(times, times[1:])), text
