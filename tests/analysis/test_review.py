"""`a2c review RUN --driver D`: rule verdicts with checked evidence, in RUN/analysis and the
report."""

from __future__ import annotations

import json

from claims_helpers import hold_out
from narrate_helpers import evidence, review_answer, write_script

from a2c.cli import main


def test_review_verdicts_checked_and_shown(fixture_run, tmp_path, maker, capsys):
    hold_out(fixture_run, maker)        # the contamination check runs (and finds nothing)
    script = write_script(tmp_path, "rev-ok", review_answer(evidence(fixture_run)))
    assert main(["review", str(fixture_run), "--driver", f"scripted:{script}",
                 "--driver-cost", "1"]) == 0
    doc = json.loads((fixture_run / "analysis" / "review.json").read_text())
    assert [v["rule"] for v in doc["verdicts"]] == ["heldout_data", "grader_tampering",
                                                     "other_model", "mode_break"]
    assert all(v["verdict"] == "clean" and v["status"] == "verified" for v in doc["verdicts"])
    # held-out data: verified by the contamination check, not by what it cites (the agent's)
    held = doc["verdicts"][0]
    assert held["kind"] == "data_use" and held["basis"] == "record"
    assert held["checks"][0]["result"] == "true" and "did not flag" in held["checks"][0]["fact"]
    assert {c["author"] for c in held["citations"]} == {"agent"}
    assert doc["violations"] == [] and doc["usage"]["calls"] == 1
    report = (fixture_run / "report" / "report.html").read_text()
    assert 'id="review-verdicts"' in report and "4 of 4 verdicts verified" in report
    assert "## Rule review" in (fixture_run / "report" / "report.md").read_text()
    assert main(["verify", str(fixture_run)]) == 0


def test_unfounded_violation_is_unverifiable(fixture_run, tmp_path, capsys):
    ans = review_answer(evidence(fixture_run), false=True)
    ans["verdicts"] = ans["verdicts"][:3]                     # mode_break left unanswered
    script = write_script(tmp_path, "rev-false", ans)
    assert main(["review", str(fixture_run), "--driver", f"scripted:{script}"]) == 0
    doc = json.loads((fixture_run / "analysis" / "review.json").read_text())
    tamper = doc["verdicts"][1]
    assert tamper["verdict"] == "violation" and tamper["status"] == "unverifiable"
    assert "no event" in tamper["why"]
    missing = doc["verdicts"][3]
    assert missing["verdict"] == "unclear" and missing["why"] == "no verdict"
    # and held-out data, "clean" on the agent's word alone: no contamination check to decide it
    held = doc["verdicts"][0]
    assert held["status"] == "unverifiable" and "could not run" in held["why"]
    assert "agent-written" in held["why"]
    assert doc["checked"]["unverifiable"] == 3
    err = capsys.readouterr().err
    assert "grader_tampering" in err and "unverifiable" in err


def test_a_record_that_fails_verification_is_not_reviewed(fixture_run, tmp_path, capsys):
    script = write_script(tmp_path, "rev-tampered", review_answer(evidence(fixture_run)))
    log = fixture_run / "logs" / "commands.log"
    log.write_text(log.read_text() + "python sneaky.py\n")      # a sealed log, changed
    assert main(["review", str(fixture_run), "--driver", f"scripted:{script}"]) != 0
    assert "failed verification" in capsys.readouterr().err
    assert not (fixture_run / "analysis").exists()


def test_the_command_line_summary_counts_false_claims():
    """A review whose every claim the record contradicts must not read as '0 verified, 0
    unverifiable' on the terminal."""
    from a2c.cli.review import _summary
    doc = {"checked": {"claims": 3, "verified": 0, "false": 3, "unverifiable": 0},
           "usage": {"tokens": 10, "cost_usd": 0.0}, "model": "scripted"}
    line = _summary(doc, "review")
    assert "0 of 3 verified" in line and "3 FALSE (the record contradicts them)" in line
    doc["checked"]["false"] = 0
    assert "FALSE" not in _summary(doc, "review")
