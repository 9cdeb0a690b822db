"""Each real agent CLI installed here, end to end: `a2c run arith --agent <id> --driver
scripted:sft-recipe --model tiny` in the bubblewrap sandbox as an unprivileged user. The scripted
driver plays the model; the real CLI parses its replies, runs the tools, and the recipe trains,
submits and waits for the score. Checked: a valid scored submission, every call through the
gateway (driver_call events) with totals equal to the script's logged usage, the transcript and
the native session log captured, a verified record, a trajectory that validates.

The base model here is the built-in tiny one: what this test proves is the scaffold, the sandbox
and the gateway, and a tiny model's SFT takes seconds where SmolLM2's takes minutes. That the
same recipe raises SmolLM2-135M's score above the baseline is proven in the container backend
(tests/agents/test_scaffolds_docker_e2e.py, its GAIN_SCAFFOLD), where the whole path (image,
gateway relay, limits) is longer.

Slow (well under a minute per scaffold); CI runs it.
A scaffold whose command is not installed where the sandbox looks is skipped, with the install
line. `A2C_SAVE_AGENT_FIXTURES=1` refreshes tests/fixtures/agents/<id>/ from the runs.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from scaffold_runs import SCAFFOLDS, agent_spec, needs, skip_unless_installed

from a2c.contracts.events import read_events, verify_events
from a2c.paths import project_root

BUDGET = "10m"
MODEL = "tiny"        # the plumbing, not the gain (see the docstring)
DRIVER = os.environ.get("A2C_E2E_DRIVER", "scripted:sft-recipe")   # or scripted:/path/to.yaml
# The recipe's SFT, kept short for CI: steps and batch of specs/drivers/sft-recipe.yaml's
# train_sft.py (it reads these from the environment the scaffold passes to its tools).
TRAIN_ENV = {"SFT_STEPS": os.environ.get("A2C_E2E_SFT_STEPS", "10"),
             "SFT_BATCH": os.environ.get("A2C_E2E_SFT_BATCH", "4")}
FIXTURES = project_root() / "tests" / "fixtures" / "agents"
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens")


def scripted_usage(log: Path) -> dict[str, int]:
    totals = dict.fromkeys(USAGE_KEYS, 0)
    calls = 0
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        calls += 1
        for key in USAGE_KEYS:
            totals[key] += int((entry.get("usage") or {}).get(key) or 0)
    totals["calls"] = calls
    return totals


GATEWAY_KEY = re.compile(r"a2c-drv-[A-Za-z0-9_-]+")


def _copy_scrubbed(src: Path, dst: Path) -> None:
    """A copy with the run's gateway key masked (mini-swe-agent's trajectory holds its config)."""
    text = src.read_text(encoding="utf-8", errors="replace")
    dst.write_text(GATEWAY_KEY.sub("a2c-drv-REDACTED", text), encoding="utf-8")


def save_fixtures(agent_id: str, run_dir: Path, run: dict, calls: list[dict]) -> None:
    """tests/fixtures/agents/<id>/: the transcript, the driver_call events, the native log."""
    out = FIXTURES / agent_id
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if run.get("transcript"):
        src = run_dir / run["transcript"]
        _copy_scrubbed(src, out / src.name)
    with open(out / "driver_calls.jsonl", "w", encoding="utf-8") as fh:
        for event in calls:
            fh.write(json.dumps(event, sort_keys=True) + "\n")
    native = agent_spec(agent_id)["transcript"]["native"]
    for path in sorted(glob.glob(str(run_dir / "agent-home" / native)))[:1]:
        if os.path.getsize(path) <= 200_000 and not path.endswith(".db"):
            _copy_scrubbed(Path(path), out / ("native-" + Path(path).name))


@pytest.mark.slow
@pytest.mark.parametrize("agent_id", SCAFFOLDS)
def test_scaffold_runs_the_sft_recipe_end_to_end(agent_id, tmp_path):
    run_mod = needs()
    skip_unless_installed(agent_id)
    opts = run_mod.RunOptions(bundle="arith", agent=agent_id, budget=BUDGET, model=MODEL,
                              runs_dir=tmp_path / "runs", driver=DRIVER,
                              agent_env=dict(TRAIN_ENV))
    ctx = run_mod.prepare(opts, report=lambda _: None)
    summary = run_mod.execute(ctx, report=lambda _: None)
    run_dir = ctx.run_dir
    run = json.loads((run_dir / "run.json").read_text())
    log_tail = (run_dir / "logs" / "agent.log").read_text(errors="replace")[-3000:]
    assert run["status"] == "finished", (summary, log_tail)

    # In bubblewrap, as an unprivileged user: the files the agent wrote are not root's.
    assert run["isolation"] == "bubblewrap"
    written = ctx.paths.workspace / "train_sft.py"
    assert written.is_file(), log_tail
    assert written.stat().st_uid != 0

    # Trained, submitted and scored (the tiny model's score is no gain; see the docstring).
    assert run["valid_submissions"] >= 1, log_tail
    assert run["best_score"] is not None and run["baseline_score"] is not None, run
    assert (ctx.paths.workspace / "train.status").read_text().startswith("TRAINING_DONE")

    # Every model call went through the gateway, and its count is the script's.
    events = read_events(run_dir / "events.jsonl")
    calls = [e for e in events if e["type"] == "driver_call"]
    assert calls, "no driver_call events"
    totals = json.loads(ctx.paths.driver_totals.read_text())
    script = scripted_usage(ctx.paths.scripted_driver_log)
    assert totals["calls"] == len(calls) == script["calls"]
    for key in USAGE_KEYS:
        assert int(totals.get(key) or 0) == script[key], (key, totals, script)
    assert run["driver_usage"]["calls"] == len(calls)
    assert {e["data"]["model"] for e in calls} == {
        agent_spec(agent_id)["driver"]["default"].split("/", 1)[1]}
    assert {e["data"]["wire"] for e in calls} == {agent_spec(agent_id)["driver"]["wire"]}
    assert all(e["data"]["status"] == 200 for e in calls), [e["data"] for e in calls]

    # The transcript and the scaffold's own session log were kept.
    assert run.get("transcript") and (run_dir / run["transcript"]).stat().st_size > 0
    native = agent_spec(agent_id)["transcript"]["native"]
    assert glob.glob(str(ctx.paths.agent_home / native)), native

    # The record verifies; the trajectory validates (when the analysis side is there).
    assert verify_events(run_dir / "events.jsonl").ok
    try:
        from a2c.analysis.verify import verify_run
    except ImportError:
        pass
    else:
        verification = verify_run(run_dir)
        assert verification.ok, verification.problems
    try:
        from a2c.analysis.trajectory import build_trajectory
        from a2c.contracts.trajectory import validate_trajectory
    except ImportError:
        pass
    else:
        path = ctx.paths.trajectory
        trajectory = json.loads(path.read_text()) if path.is_file() \
            else build_trajectory(run_dir)
        assert validate_trajectory(trajectory) == []
        assert trajectory["steps"]

    if os.environ.get("A2C_SAVE_AGENT_FIXTURES") == "1":
        save_fixtures(agent_id, run_dir, run, calls)
