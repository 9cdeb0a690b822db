"""`--narrate` and `review` on a run a real scaffold recorded: Claude Code driven by the scripted
SFT recipe on the tiny model (as tests/agents/test_scaffolds_e2e.py runs it), then a narrator and
a reviewer whose citations name that run's events, submission, commands and the agent's own
train_sft.py at its snapshot (verified), plus planted false ones (flagged); the record still
verifies. Then the shipped scripted narrator and reviewer on that real record, every claim
verified. Slow: one real run (under a minute of training)."""

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
    assert doc["checked"] == {"claims": 4, "verified": 3, "false": 0, "unverifiable": 1}
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

    # the shipped narrator and reviewer (no provider key) on this real record: what they say is
    # read from its digest (the recorder hook's command lines, the agent's own train_sft.py)
    capsys.readouterr()
    assert main(["report", str(run), "--narrate", "--driver", "scripted:narrator"]) == 0
    doc = json.loads((run / "analysis" / "narrative.json").read_text())
    assert doc["checked"]["unverifiable"] == 0 and doc["checked"]["verified"] >= 3, doc
    texts = {k: " ".join(c["text"] for c in v) for k, v in doc["sections"].items()}
    assert "SFT" in texts["strategy"] and '"python train_sft.py' in texts["strategy"]
    info = json.loads((run / "run.json").read_text())
    if info["best_score"] > info["baseline_score"]:        # the tiny model mostly stays at 0
        assert texts["turning_points"].startswith("Submission 1 raised the score")
    else:
        assert f"No submission beat the baseline ({info['baseline_score']})" in \
            texts["failure_modes"] and "max_steps" in texts["what_would_have_helped"]
    assert main(["review", str(run), "--driver", "scripted:reviewer"]) == 0
    rev = {v["rule"]: v for v in json.loads((run / "analysis" / "review.json").read_text())
           ["verdicts"]}
    assert all(v["status"] == "verified" for v in rev.values()), rev
    assert [rev[r]["verdict"] for r in ("heldout_data", "grader_tampering", "mode_break")] == \
        ["clean"] * 3
    assert rev["other_model"]["verdict"] in ("clean", "unclear")  # the base model's line may
    assert main(["verify", str(run)]) == 0                         # be past the diff excerpt
