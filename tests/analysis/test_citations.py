"""analysis/citations.py: each citation resolved against the record, quotes checked."""

from __future__ import annotations

from narrate_helpers import evidence, false_citations

from a2c.analysis.citations import Evidence


def test_real_citations_verify(fixture_run):
    ev = evidence(fixture_run)
    checker = Evidence(fixture_run)
    for kind in ("event", "submission", "command", "file"):
        out = checker.check(ev[kind])
        assert out["status"] == "verified", (kind, out)
    claim = checker.check_claim({"text": "x", "citations": [ev["event"], ev["file"]]})
    assert claim["status"] == "verified"
    checker.close()


def test_false_citations_are_flagged_with_why(fixture_run):
    ev = evidence(fixture_run)
    checker = Evidence(fixture_run)
    bad_event, bad_quote = (checker.check(c) for c in false_citations(ev))
    assert bad_event["status"] == "unverifiable" and "no event" in bad_event["why"]
    assert bad_quote["status"] == "unverifiable" and "quote is not in" in bad_quote["why"]
    cases = [({"kind": "submission", "ref": "99", "quote": "x"}, "no submission"),
             ({"kind": "command", "ref": 10_000, "quote": "x"}, "no line"),
             ({"kind": "file", "ref": "deadbeef:train.py", "quote": "x"}, "no snapshot commit"),
             ({"kind": "file", "ref": f"{ev['_snap']}:nope.py", "quote": "x"}, "no file"),
             ({"kind": "event", "ref": 0, "quote": ""}, "no quote"),
             ({"kind": "rumour", "ref": 1, "quote": "x"}, "unknown citation kind"),
             ("just a string", "not a {kind, ref, quote}")]
    for citation, why in cases:
        out = checker.check(citation)
        assert out["status"] == "unverifiable" and why in out["why"], (citation, out)
    # one false citation makes the whole claim unverifiable; no citation at all too
    mixed = checker.check_claim({"text": "x", "citations": [ev["event"], *false_citations(ev)]})
    assert mixed["status"] == "unverifiable" and "no event" in mixed["why"]
    assert checker.check_claim("bare claim")["why"] == "cites no evidence"
    checker.close()


def test_quote_matching_normalises_case_and_space(fixture_run):
    checker = Evidence(fixture_run)
    out = checker.check({"kind": "event", "ref": 0, "quote": "  RUN_STARTED  "})
    assert out["status"] == "verified"
    checker.close()
