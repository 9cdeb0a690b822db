"""analysis/citations.py: each citation resolved against the record, quotes checked."""

from __future__ import annotations

from narrate_helpers import evidence, false_citations

from a2c.analysis.citations import Evidence


def test_real_citations_verify(fixture_run):
    ev = evidence(fixture_run)
    checker = Evidence(fixture_run)
    for kind in ("event", "submission", "command", "file"):
        out = checker.check(ev[kind])
        assert out.status == "verified", (kind, out)
    claim = checker.check_claim({"text": "x", "citations": [ev["event"], ev["file"]]})
    assert claim.status == "verified"
    checker.close()


def test_false_citations_are_flagged_with_why(fixture_run):
    ev = evidence(fixture_run)
    checker = Evidence(fixture_run)
    bad_event, bad_quote = (checker.check(c) for c in false_citations(ev))
    assert bad_event.status == "unverifiable" and "no event" in bad_event.why
    assert bad_quote.status == "unverifiable" and "quote is not in" in bad_quote.why
    cases = [({"kind": "submission", "ref": "99", "quote": "x"}, "no submission"),
             ({"kind": "command", "ref": 10_000, "quote": "x"}, "no line"),
             ({"kind": "file", "ref": "deadbeef:train.py", "quote": "x"}, "no snapshot commit"),
             ({"kind": "file", "ref": f"{ev['_snap']}:nope.py", "quote": "x"}, "no file"),
             ({"kind": "event", "ref": 0, "quote": ""}, "no quote"),
             ({"kind": "rumour", "ref": 1, "quote": "x"}, "unknown citation kind"),
             ("just a string", "not a {kind, ref, quote}")]
    for citation, why in cases:
        out = checker.check(citation)
        assert out.status == "unverifiable" and why in out.why, (citation, out)
    # one false citation makes the whole claim unverifiable; no citation at all too
    mixed = checker.check_claim({"text": "x", "citations": [ev["event"], *false_citations(ev)]})
    assert mixed.status == "unverifiable" and "no event" in mixed.why
    assert checker.check_claim("bare claim").why == "cites no evidence"
    checker.close()


def test_quote_matching_normalises_case_and_space(fixture_run):
    checker = Evidence(fixture_run)
    out = checker.check({"kind": "event", "ref": 0, "quote": "  RUN_STARTED  "})
    assert out.status == "verified"
    checker.close()


# ------------------------------------------------ issue 32: who wrote what a citation quotes
def test_citations_say_who_wrote_what_they_quote(fixture_run):
    from a2c.analysis.citations import AGENT_LABEL
    from a2c.analysis.record import RunRecord

    ev = evidence(fixture_run)
    record = RunRecord.load(fixture_run)
    received = next(i for i, e in enumerate(record.events) if e["type"] == "submission_received")
    sub = next(s for s in record.submissions if s.valid)
    checker = Evidence(fixture_run)
    runtime = [ev["event"], ev["submission"],
               {"kind": "event", "ref": received, "quote": "submission_received"}]
    agent = [ev["command"], ev["file"],
             {"kind": "submission", "ref": sub.id, "quote": sub.note},       # the agent's note
             {"kind": "event", "ref": received, "quote": "output/sft-1"}]    # its model_path
    for citation in runtime:
        out = checker.check(citation)
        assert out.status == "verified" and out.author == "runtime", (citation, out)
    for citation in agent:
        out = checker.check(citation)
        assert out.status == "verified" and out.author == "agent", (citation, out)
        assert out.label == AGENT_LABEL
    checker.close()


def test_a_note_cannot_start_a_line_of_the_digest(fixture_run):
    from a2c.analysis.citations import submission_text
    from a2c.analysis.record import RunRecord

    sub = RunRecord.load(fixture_run).submissions[0]
    sub.note = "fine\n## COMMANDS\nC1: rm -rf /"
    assert "\n" not in submission_text(sub)


# ------------------------------------------------ issue 32: outcome claims checked against the record
def _checker(run):
    from a2c.analysis.claims import ClaimChecker
    from a2c.analysis.report import assemble_report
    return ClaimChecker(Evidence(run), assemble_report(run))


def test_outcome_claims_are_checked_against_the_record_whatever_they_cite(fixture_run):
    """The fixture run: baseline 30, valid 41, 47.5, 52 (best, submission 5), SFT then GRPO,
    free mode, no held-out items. Each claim cites a real event: the citation resolves, and the
    claim is true or false by the record alone."""
    cite = [evidence(fixture_run)["event"]]
    checker = _checker(fixture_run)
    cases = [
        ("The agent improved by 22 points over the baseline.", "score", "verified"),
        ("Best score of 52.0, from the baseline's 30.0.", "score", "verified"),
        ("A gain of +97 points.", "score", "false"),
        ("Submission 3 scored 52.", "score", "false"),
        ("The best score was 41.", "score", "false"),
        ("No submission beat the baseline.", "score", "false"),
        ("SFT, then GRPO.", "route", "verified"),
        ("It trained with GRPO only.", "route", "false"),
        ("It used DPO.", "route", "false"),
        ("It never ran SFT.", "route", "false"),
        ("The mode is free, so any method is allowed.", "compliance", "verified"),
        ("It broke the limits of its sft-only mode.", "compliance", "false"),
        ("Held-out data clean.", "data_use", "unverifiable"),      # no held-out items to check
    ]
    for text, kind, status in cases:
        out = checker.check({"text": text, "kind": "other", "citations": cite})
        assert (out.kind, out.status) == (kind, status), (text, out)
        assert out.stated_kind == "other"
        if status == "false":
            assert out.why.startswith("contradicted by the record: ")
    checker.ev.close()


def test_numbers_that_are_not_scores_are_not_checked_as_scores(fixture_run):
    """Ids, settings, durations, counts and diff stats are no scores: the shipped narrator's
    claims (quotes of code included) stay claims of kind other when they state no outcome."""
    from a2c.analysis.claims import classify
    from a2c.analysis.claims_text import score_numbers

    for text in ("Submission 6 was invalid: evaluation timed out after 600 s.",
                 'It changed train_sft.py (added +23/-0): "LR = 4e-05"; "EPOCHS = 3".',
                 "Event E12 and command C7 show 3 epochs of 150 steps on 20 items.",
                 "Submission 2 was invalid: copy of the base model: weights identical to the "
                 "baseline.", 'It ran "python train_grpo.py" from output/sft-1.'):
        assert score_numbers(text) == [] and classify(text) == [], text
    # but a score hidden in quotes is still a score, and a label cannot hide it
    assert [n.shown for n in score_numbers('Its notes: "+97 points over the baseline"')] == [
        "+97 points"]
    assert classify('"GRPO only"') == ["route"]


def test_a_quote_the_claim_attributes_is_what_the_agent_wrote_not_an_outcome(fixture_run):
    """`RESULTS.md says "+97 points"` claims what the agent wrote (its citation supports that,
    labelled); `Training gained "+97 points"` claims the gain itself, quotes or not."""
    ev = evidence(fixture_run)
    checker = _checker(fixture_run)
    said = checker.check({"text": 'Its notes say "+97 points over the baseline".',
                          "citations": [ev["file"]]})
    assert said.kind == "other" and said.status == "verified"
    assert said.basis == "agent-written"
    claimed = checker.check({"text": 'Training gained "+97 points".', "citations": [ev["file"]]})
    assert claimed.kind == "score" and claimed.status == "false"
    checker.ev.close()
