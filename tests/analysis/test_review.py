"""`a2c review RUN --driver D`: rule verdicts with checked evidence, in RUN/analysis and the
report."""

from __future__ import annotations

import json

from narrate_helpers import evidence, review_answer, write_script

from a2c.cli import main


def test_review_verdicts_checked_and_shown(fixture_run, tmp_path, capsys):
    script = write_script(tmp_path, "rev-ok", review_answer(evidence(fixture_run)))
    assert main(["review", str(fixture_run), "--driver", f"scripted:{script}",
                 "--driver-cost", "1"]) == 0
    doc = json.loads((fixture_run / "analysis" / "review.json").read_text())
    assert [v["rule"] for v in doc["verdicts"]] == ["heldout_data", "grader_tampering",
                                                     "other_model", "mode_break"]
    assert all(v["verdict"] == "clean" and v["status"] == "verified" for v in doc["verdicts"])
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
    assert doc["checked"]["unverifiable"] == 2
    err = capsys.readouterr().err
    assert "grader_tampering" in err and "unverifiable" in err


def test_a_record_that_fails_verification_is_not_reviewed(fixture_run, tmp_path, capsys):
    script = write_script(tmp_path, "rev-tampered", review_answer(evidence(fixture_run)))
    log = fixture_run / "logs" / "commands.log"
    log.write_text(log.read_text() + "python sneaky.py\n")      # a sealed log, changed
    assert main(["review", str(fixture_run), "--driver", f"scripted:{script}"]) != 0
    assert "failed verification" in capsys.readouterr().err
    assert not (fixture_run / "analysis").exists()
