"""The shipped scripted narrator and reviewer (specs/drivers/narrator.yaml, reviewer.yaml):
`a2c report RUN --narrate --driver scripted:narrator` and `a2c review RUN --driver
scripted:reviewer` work with no provider key, end to end through the analysis gateway, and what
they say is computed from the run's digest (another run, another analysis), every citation
verified against the record. And a failed analysis leaves no folder behind (issue 31)."""

from __future__ import annotations

import json

from claims_helpers import hold_out
from narrate_helpers import evidence, review_answer, write_script

from a2c.cli import main


def _narrative(run):
    return json.loads((run / "analysis" / "narrative.json").read_text())


def _texts(doc, section):
    return [c["text"] for c in doc["sections"][section]]


def test_the_shipped_narrator_writes_a_case_study_of_the_run(fixture_run, capsys):
    assert main(["report", str(fixture_run), "--narrate", "--driver", "scripted:narrator"]) == 0
    doc = _narrative(fixture_run)
    assert doc["driver"] == "scripted:narrator" and doc["usage"]["calls"] == 1
    assert doc["checked"]["unverifiable"] == 0 and doc["checked"]["verified"] >= 10
    assert all(doc["sections"][k] for k in ("strategy", "turning_points", "failure_modes",
                                            "what_would_have_helped"))
    # the facts of this run, read from its digest: the route in its code, its commands, the
    # submissions that raised the score and the code changed before them, its invalid ones
    strategy = " ".join(_texts(doc, "strategy"))
    assert "SFT → GRPO" in strategy and '"python train_sft.py"' in strategy
    turning = _texts(doc, "turning_points")
    assert turning[0].startswith("Submission 1 raised the score from the baseline's 30.0 "
                                 "to 41.0") and '"LR = 4e-05"' in turning[0]
    assert [t.split(" raised")[0] for t in turning] == ["Submission 1", "Submission 3",
                                                       "Submission 5"]
    assert "from 47.5 to 52.0" in turning[2] and "GRPOConfig" in turning[2]
    failures = " ".join(_texts(doc, "failure_modes"))
    for sid, error in (("2", "copy of the base model"), ("4", "config.json"),
                       ("6", "timed out after 600 s")):
        assert f"Submission {sid} was invalid" in failures and error in failures
    helped = " ".join(_texts(doc, "what_would_have_helped"))
    assert "save_model" in helped and "evaluation timeout" in helped
    kinds = {c["kind"] for s in doc["sections"].values() for claim in s
             for c in claim["citations"]}
    assert kinds == {"event", "submission", "command", "file"}
    # the route and the scores are checked against the record's facts, not their citations
    claims = [c for s in doc["sections"].values() for c in s]
    assert {c["kind"] for c in claims} == {"route", "score", "other"}
    for claim in claims:
        if claim["kind"] != "other":
            assert claim["basis"] == "record" and all(
                x["result"] == "true" for x in claim["checks"]), claim
    assert doc["sections"]["strategy"][0]["checks"][0]["fact"].endswith("found GRPO, SFT")
    assert "11 of 11 claims verified" in (fixture_run / "report" / "report.html").read_text()
    assert "verified against the record, 0 unverifiable" in capsys.readouterr().err
    assert main(["verify", str(fixture_run)]) == 0


def test_the_narrator_follows_the_run_it_is_given(maker, tmp_path, capsys):
    """Not a canned text: a run with two submissions and another seed gets its own story."""
    run = maker.make_run(tmp_path / "short", n=2, seed=3)
    info = json.loads((run / "run.json").read_text())
    assert main(["report", str(run), "--narrate", "--driver", "scripted:narrator"]) == 0
    doc = _narrative(run)
    assert doc["checked"]["unverifiable"] == 0
    (turn,) = _texts(doc, "turning_points")
    assert (f"from the baseline's {info['baseline_score']} to {info['best_score']}" in turn)
    assert "52.0" not in json.dumps(doc) and "GRPO" not in json.dumps(doc["sections"])
    (failure,) = _texts(doc, "failure_modes")
    assert failure.startswith("Submission 2 was invalid: copy of the base model")


def test_the_shipped_reviewer_reviews_the_run(fixture_run, maker, capsys):
    hold_out(fixture_run, maker)            # the held-out verdict is checked against the record
    assert main(["review", str(fixture_run), "--driver", "scripted:reviewer"]) == 0
    doc = json.loads((fixture_run / "analysis" / "review.json").read_text())
    assert [(v["rule"], v["verdict"], v["status"]) for v in doc["verdicts"]] == [
        ("heldout_data", "clean", "verified"), ("grader_tampering", "clean", "verified"),
        ("other_model", "clean", "verified"), ("mode_break", "clean", "verified")]
    by_rule = {v["rule"]: v for v in doc["verdicts"]}
    assert "train.jsonl" in by_rule["heldout_data"]["text"]
    assert "A2C_BASE_MODEL" in by_rule["other_model"]["text"]
    assert "SFT → GRPO" in by_rule["mode_break"]["text"]
    assert [by_rule[r]["kind"] for r in ("heldout_data", "mode_break")] == ["data_use",
                                                                           "compliance"]
    assert "did not flag" in by_rule["heldout_data"]["checks"][0]["fact"]
    assert "4 of 4 verdicts verified" in (fixture_run / "report" / "report.html").read_text()
    assert main(["verify", str(fixture_run)]) == 0


def test_the_reviewer_flags_what_the_record_shows(maker, tmp_path, capsys):
    """An sft-only run whose code calls GRPO, and whose agent read the held-out file: both are
    violations, each citing the line of the record that shows it. The mode's is verified by the
    record's compliance verdict; the held-out one rests on the command log, which the agent
    writes, and the contamination check found nothing: unverifiable, and says why."""
    run = maker.make_run(tmp_path / "bad", mode="sft-only")
    log = run / "logs" / "commands.log"
    log.write_text(log.read_text() + "cat /grader/heldout.jsonl | head -n 5\n")
    maker.reseal(run)
    assert main(["review", str(run), "--driver", "scripted:reviewer"]) == 0
    doc = json.loads((run / "analysis" / "review.json").read_text())
    by_rule = {v["rule"]: v for v in doc["verdicts"]}
    held = by_rule["heldout_data"]
    assert held["verdict"] == "violation" and held["status"] == "unverifiable"
    assert held["citations"][0]["kind"] == "command" and held["citations"][0]["ref"] == 7
    assert held["citations"][0]["status"] == "verified" and held["citations"][0]["author"] == "agent"
    assert "agent-written" in held["why"]
    mode = by_rule["mode_break"]
    assert mode["verdict"] == "violation" and mode["status"] == "verified"
    assert "sft-only" in mode["text"] and "GRPO" in mode["text"]
    facts = {x["kind"]: x["fact"] for x in mode["checks"]}
    assert mode["basis"] == "record" and "compliance check says violates" in facts["compliance"]
    assert facts["route"].endswith("found GRPO, SFT")
    assert doc["violations"] == ["heldout_data", "mode_break"]


# ------------------------------------------------------- issue 31: failed attempts clean up
def _calls(run):
    folder = run / "analysis" / "calls"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None


def test_a_failed_review_leaves_no_folder(fixture_run, tmp_path, capsys):
    prose = tmp_path / "prose.yaml"
    prose.write_text("apiVersion: a2c/v1\nkind: DriverScript\nid: prose\n"
                     "side: {text: 'It looked fine to me.'}\nturns: [{say: done}]\n")
    assert main(["review", str(fixture_run), "--driver", f"scripted:{prose}"]) != 0
    assert "holds no JSON object" in capsys.readouterr().err
    assert not (fixture_run / "analysis").exists()      # nothing made by the attempt is left
    # a successful review keeps its files; a failed one after it removes only its own
    good = write_script(tmp_path, "rev-ok", review_answer(evidence(fixture_run)))
    assert main(["review", str(fixture_run), "--driver", f"scripted:{good}"]) == 0
    (kept,) = _calls(fixture_run)
    assert kept.startswith("review-")
    assert (fixture_run / "analysis" / "calls" / kept / "events.jsonl").is_file()
    before = (fixture_run / "analysis" / "review.json").read_text()
    assert main(["review", str(fixture_run), "--driver", f"scripted:{prose}"]) != 0
    assert _calls(fixture_run) == [kept]
    assert (fixture_run / "analysis" / "review.json").read_text() == before
    # a spent budget is a failure too
    assert main(["review", str(fixture_run), "--driver", f"scripted:{good}",
                 "--driver-tokens", "50"]) != 0
    assert "budget" in capsys.readouterr().err.lower()
    assert _calls(fixture_run) == [kept]


def test_two_analyses_in_one_second_get_folders_of_their_own(tmp_path):
    from a2c.cli.review import _call_folder
    made, first = _call_folder(tmp_path / "analysis", "review")
    assert made == [tmp_path / "analysis" / "calls", tmp_path / "analysis"]
    again, second = _call_folder(tmp_path / "analysis", "review")
    assert again == [] and first != second and first.is_dir() and second.is_dir()
