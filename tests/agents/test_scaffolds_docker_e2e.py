"""Each LLM scaffold in the docker backend, end to end: `a2c run arith --agent <id> --backend
docker --driver scripted:sft-recipe`. The agent layer carries the scaffold's pinned npm/pip
packages (runtime/sandbox/docker_scaffolds.py: a2c-tools:<key>, built once per install lines);
the container has network `none`, the driver gateway is its mounted Unix socket reached through
the loopback forwarder, HOME is the run's agent home. Checked as for bubblewrap
(test_scaffolds_e2e.py, whose short SFT and usage check this reuses): a scored submission, every
call through the gateway with the script's totals, the transcript and the native session log, a
verified record; and the run's isolation is docker, its files the agent's uid's, its image the
agent layer with the tools.

The gain is a property of the recipe (the same script whichever CLI runs it), so one scaffold,
`GAIN_SCAFFOLD`, trains SmolLM2-135M and must score above the baseline; the others run the same
recipe on the built-in tiny model (the route, the image, the gateway and the record are what
differs between them), which keeps CI minutes for what only a long run proves.

Slow (the tools image and the agent layer, then the SFT: about 100 s with SmolLM2, under a
minute on the tiny model); skipped in one line without an engine. OpenHands is not here: its install is a command (uv fetches a
Python 3.12), which the docker backend refuses (docs/agents.md).
"""

from __future__ import annotations

import glob
import json
import time

import pytest
from scaffold_runs import agent_spec
from test_scaffolds_e2e import BUDGET, DRIVER, TRAIN_ENV, USAGE_KEYS, scripted_usage

from a2c.contracts.events import read_events, verify_events

DOCKER_SCAFFOLDS = ["claude-code", "codex", "gemini-cli", "opencode", "mini-swe-agent"]
GAIN_SCAFFOLD = "claude-code"     # trains SmolLM2 and must gain; the others run the tiny model


@pytest.fixture(scope="module")
def engine():
    from a2c.errors import RunError
    try:
        from a2c.runtime.sandbox.docker_engine import client
        return client()
    except RunError as exc:
        pytest.skip(f"no Docker engine: {exc}")


@pytest.mark.slow
@pytest.mark.timeout(1800)    # a cold tools image and agent layer, the baseline, a 10m budget
@pytest.mark.parametrize("agent_id", DOCKER_SCAFFOLDS)
def test_scaffold_runs_the_sft_recipe_in_docker(agent_id, tmp_path, engine):
    run_mod = pytest.importorskip("a2c.runtime.run")
    pytest.importorskip("a2c.agents.scripted_driver")
    gain = agent_id == GAIN_SCAFFOLD
    opts = run_mod.RunOptions(bundle="arith", agent=agent_id, budget=BUDGET, backend="docker",
                              runs_dir=tmp_path / "runs", driver=DRIVER,
                              model=None if gain else "tiny", agent_env=dict(TRAIN_ENV))
    ctx = run_mod.prepare(opts, report=lambda _: None)
    start = time.monotonic()
    summary = run_mod.execute(ctx, report=print)
    run_dir = ctx.run_dir
    run = json.loads((run_dir / "run.json").read_text())
    image = json.loads((run_dir / "logs" / "image.json").read_text())
    log_tail = (run_dir / "logs" / "agent.log").read_text(errors="replace")[-3000:]
    print(f"{agent_id} in docker: {time.monotonic() - start:.0f} s (image {image['image']}, "
          f"{'built' if image['built'] else 'reused'} {image['steps']}), baseline "
          f"{run['baseline_score']}, best {run['best_score']}")
    assert run["status"] == "finished", (summary, log_tail)

    # In the container, as the agent's unprivileged uid, from the agent layer with its tools.
    assert run["isolation"] == "docker"
    assert image["image"].startswith(f"a2c-arith-{agent_id}:")
    written = ctx.paths.workspace / "train_sft.py"
    assert written.is_file(), log_tail
    assert written.stat().st_uid != 0
    labels = engine.images.get(image["image"]).labels or {}
    assert labels.get("a2c.tools", "").startswith("a2c-tools:")

    # Scored; with SmolLM2, above the baseline.
    assert run["valid_submissions"] >= 1, log_tail
    assert run["best_score"] is not None and run["baseline_score"] is not None, run
    assert (ctx.paths.workspace / "train.status").read_text().startswith("TRAINING_DONE")
    if gain:
        assert run["best_score"] > run["baseline_score"], run

    # Every model call went through the gateway (the mounted socket), the script's count.
    events = read_events(run_dir / "events.jsonl")
    calls = [e for e in events if e["type"] == "driver_call"]
    assert calls, "no driver_call events"
    totals = json.loads(ctx.paths.driver_totals.read_text())
    script = scripted_usage(ctx.paths.scripted_driver_log)
    assert totals["calls"] == len(calls) == script["calls"]
    for key in USAGE_KEYS:
        assert int(totals.get(key) or 0) == script[key], (key, totals, script)
    assert {e["data"]["wire"] for e in calls} == {agent_spec(agent_id)["driver"]["wire"]}
    assert all(e["data"]["status"] == 200 for e in calls), [e["data"] for e in calls]

    # The transcript and the scaffold's own session log, kept in the run's agent home.
    assert run.get("transcript") and (run_dir / run["transcript"]).stat().st_size > 0
    native = agent_spec(agent_id)["transcript"]["native"]
    assert glob.glob(str(ctx.paths.agent_home / native)), native

    assert verify_events(run_dir / "events.jsonl").ok
    try:
        from a2c.analysis.verify import verify_run
    except ImportError:
        return
    verification = verify_run(run_dir)
    assert verification.ok, verification.problems
