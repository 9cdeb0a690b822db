"""`a2c report RUN --narrate --driver D`: the case study through a metered gateway, every claim
checked against the record, outputs beside the report, the signed record untouched."""

from __future__ import annotations

import json

from narrate_helpers import evidence, narrative, write_script

from a2c.cli import main


def _narrate(run, script, *extra):
    return main(["report", str(run), "--narrate", "--driver", f"scripted:{script}", *extra])


def test_narrative_all_claims_verified(fixture_run, tmp_path, capsys):
    script = write_script(tmp_path, "narr-ok", narrative(evidence(fixture_run)))
    assert _narrate(fixture_run, script, "--driver-tokens", "100000") == 0
    out = fixture_run / "analysis"
    doc = json.loads((out / "narrative.json").read_text())
    assert doc["checked"] == {"claims": 3, "verified": 3, "false": 0, "unverifiable": 0}
    assert doc["model"] == "claude-sonnet-4-5" and doc["driver"].startswith("scripted:")
    assert doc["usage"]["calls"] == 1 and doc["usage"]["tokens"] == 300
    assert doc["usage"]["cost_usd"] > 0
    # the call is recorded in the analysis's own gateway folder, not in the run's events
    calls = fixture_run / doc["gateway_record"]
    assert '"driver_call"' in (calls / "events.jsonl").read_text()
    assert "driver_call" not in (fixture_run / "events.jsonl").read_text()
    md = (out / "narrative.md").read_text()
    assert "## Case study" in md and "### Strategy" in md and "**verified**" in md
    assert "Case study" in (out / "narrative.html").read_text()
    report = (fixture_run / "report" / "report.html").read_text()
    assert 'id="narrative"' in report and "3 of 3 claims verified" in report
    assert "## Case study" in (fixture_run / "report" / "report.md").read_text()
    assert main(["verify", str(fixture_run)]) == 0          # the sealed record is unchanged


def test_false_citation_is_flagged(fixture_run, tmp_path, capsys):
    script = write_script(tmp_path, "narr-false", narrative(evidence(fixture_run), false=True))
    assert _narrate(fixture_run, script) == 0
    doc = json.loads((fixture_run / "analysis" / "narrative.json").read_text())
    assert doc["checked"]["unverifiable"] == 1
    bad = doc["sections"]["failure_modes"][0]
    assert bad["status"] == "unverifiable"
    assert "no event" in bad["why"] and "quote is not in" in bad["why"]
    assert "1 unverifiable" in capsys.readouterr().err
    html = (fixture_run / "report" / "report.html").read_text()
    assert "unverifiable" in html and "quote is not in what it cites" in html


def test_budget_is_enforced_and_nothing_half_written(fixture_run, tmp_path, capsys):
    script = write_script(tmp_path, "narr-budget", narrative(evidence(fixture_run)))
    assert _narrate(fixture_run, script, "--driver-tokens", "50") != 0
    err = capsys.readouterr().err
    assert "budget" in err.lower(), err
    assert not (fixture_run / "analysis" / "narrative.json").exists()
    assert not (fixture_run / "report" / "report.html").exists()
    assert not (fixture_run / "analysis").exists()    # the failed attempt's gateway folder too


def test_bad_answers_are_clear_errors(fixture_run, tmp_path, capsys):
    script = tmp_path / "narr-prose.yaml"
    script.write_text("apiVersion: a2c/v1\nkind: DriverScript\nid: narr-prose\n"
                      "side: {text: 'I think it went well.'}\nturns: [{say: done}]\n")
    assert _narrate(fixture_run, script) != 0
    assert "holds no JSON object" in capsys.readouterr().err
    assert main(["report", str(fixture_run), "--narrate"]) != 0
    assert "--narrate needs --driver" in capsys.readouterr().err
    assert not (fixture_run / "analysis" / "narrative.json").exists()


def test_run_with_driver_steps(maker, tmp_path, capsys):
    """A run with a driver record: its steps are in the digest, and the report renders both
    the driver section and the case study (their template variables do not collide)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "trajectory"))
    import driver_record as dr

    from a2c.analysis.citations import Evidence
    from a2c.analysis.digest import build_digest
    from a2c.analysis.report import assemble_report

    run = dr.add_to_run(maker.make_run(tmp_path / "run"), maker, "claude-code", stream=True)
    ev = Evidence(run)
    digest = build_digest(ev, assemble_report(run))
    ev.close()
    assert "## AGENT STEPS\nstep 1" in digest and "driver_call" not in digest
    script = write_script(tmp_path, "narr-driven", narrative(evidence(run), false=True))
    assert _narrate(run, script) == 0
    html = (run / "report" / "report.html").read_text()
    assert 'id="driver"' in html and 'id="narrative"' in html and "3 of 4 claims" in html


def test_outputs_follow_their_schema(fixture_run, tmp_path, capsys):
    import jsonschema
    import pytest

    from a2c.analysis.narrate import validate_layer

    answer = narrative(evidence(fixture_run), false=True)
    answer["strategy"][0].update(status="verified", why=7, confidence="high")  # the model's own
    script = write_script(tmp_path, "narr-extra", answer)
    assert _narrate(fixture_run, script) == 0
    doc = json.loads((fixture_run / "analysis" / "narrative.json").read_text())
    validate_layer(doc)
    assert "confidence" not in doc["sections"]["strategy"][0]
    for broken in ({k: v for k, v in doc.items() if k != "model"},
                   {**doc, "sections": {**doc["sections"], "failure_modes": [
                       {"text": "x", "citations": [], "status": "unverifiable"}]}}):
        with pytest.raises(jsonschema.ValidationError):
            validate_layer(broken)


def test_a_layer_written_before_claims_had_kinds_still_renders(fixture_run):
    """RUN/analysis/narrative.json of an earlier a2c (no kind, author, false count) still shows."""
    from a2c.analysis.report import write_report

    old = {"format": "a2c-narrative/1", "run_id": "x", "driver": "scripted:n", "model": "m",
           "wire": "anthropic", "gateway_record": "analysis/calls/x", "record_verified": True,
           "written_at": "2026-01-01T00:00:00Z", "digest_chars": 1,
           "usage": {"calls": 1, "input_tokens": 1, "output_tokens": 1, "tokens": 2,
                     "cost_usd": 0.0},
           "checked": {"claims": 1, "verified": 1, "unverifiable": 0},
           "sections": {"strategy": [{"text": "SFT.", "status": "verified", "citations": [
               {"kind": "event", "ref": 0, "quote": "run_started", "status": "verified"}]}],
                        "turning_points": [], "failure_modes": [], "what_would_have_helped": []}}
    (fixture_run / "analysis").mkdir()
    (fixture_run / "analysis" / "narrative.json").write_text(json.dumps(old))
    _, paths = write_report(fixture_run)
    assert "1 of 1 claims verified" in paths.html.read_text()
    assert "SFT. — **verified**" in paths.md.read_text()
