"""`--narrate` and `review` on a run a real scaffold recorded: Claude Code driven by the scripted
SFT recipe on the tiny model (as tests/agents/test_scaffolds_e2e.py runs it), then a narrator and
a reviewer whose citations name that run's events, submission, commands and the agent's own
train_sft.py at its snapshot (verified), plus planted false ones (flagged); the record still
verifies. Slow: one real run (under a minute of training)."""

from __future__ import annotations

import json

import pytest
from narrate_helpers import evidence, narrative, review_answer, write_script

from a2c.cli import main


@pytest.mark.slow
def test_narrate_and_review_a_real_scaffold_run(tmp_path, capsys):
    run_mod = pytest.importorskip("a2c.runtime.run")
    from a2c.runtime.sandbox.local import bwrap_works
    if not bwrap_works():
        pytest.skip("needs bubblewrap")
    from a2c.runtime.scaffold_tools import find_command
    if not find_command("claude"):
        pytest.skip("needs the claude CLI where the sandbox looks (a2c agents install "
                    "claude-code)")
    opts = run_mod.RunOptions(bundle="arith", agent="claude-code", budget="10m", model="tiny",
                              runs_dir=tmp_path / "runs", driver="scripted:sft-recipe",
                              agent_env={"SFT_STEPS": "10", "SFT_BATCH": "4"})
    ctx = run_mod.prepare(opts, report=lambda _: None)
    run_mod.execute(ctx, report=lambda _: None)
    run = ctx.run_dir
    assert json.loads((run / "run.json").read_text())["status"] == "finished"

    ev = evidence(run)
    assert ev["_path"] == "train_sft.py"                  # the agent's own code, at its snapshot
    narrator = write_script(tmp_path, "narr", narrative(ev, false=True))
    assert main(["report", str(run), "--narrate", "--driver", f"scripted:{narrator}",
                 "--driver-tokens", "100000"]) == 0
    doc = json.loads((run / "analysis" / "narrative.json").read_text())
    assert doc["checked"] == {"claims": 4, "verified": 3, "unverifiable": 1}
    # the digest (with the scaffold's steps) went through the gateway, which kept its body
    blobs = (run / doc["gateway_record"] / "driver" / "blobs").iterdir()
    assert any("AGENT STEPS" in b.read_text(errors="replace") and "step 3:" in
               b.read_text(errors="replace") for b in blobs)
    reviewer = write_script(tmp_path, "rev", review_answer(ev, false=True))
    assert main(["review", str(run), "--driver", f"scripted:{reviewer}"]) == 0
    rev = json.loads((run / "analysis" / "review.json").read_text())
    assert [v["status"] for v in rev["verdicts"]] == ["verified", "unverifiable", "verified",
                                                      "verified"]
    html = (run / "report" / "report.html").read_text()
    assert 'id="driver"' in html and 'id="narrative"' in html and 'id="review-verdicts"' in html
    assert main(["verify", str(run)]) == 0
