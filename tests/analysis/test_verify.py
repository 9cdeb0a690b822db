"""`a2c verify` and the refusal of `a2c report` for records that fail verification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2c.analysis.report import write_report
from a2c.analysis.verify import VerificationError, verify_run
from a2c.cli import main

N_EVENTS = 25  # lines in the default fixture's events.jsonl (the last one its seal)


def test_fixture_verifies(pristine_run, capsys):
    result = verify_run(pristine_run)
    assert result.ok, [str(p) for p in result.problems]
    assert result.events == N_EVENTS
    assert result.authenticated
    assert [c.name for c in result.checks] == ["event chain", "authenticated", "run.json",
                                               "agent split", "bundle digest",
                                               "journal matches events", "results files",
                                               "record seal"]
    assert main(["verify", str(pristine_run)]) == 0
    assert "record verified and authenticated" in capsys.readouterr().out


def test_fixture_has_expected_line_count(pristine_run):
    assert len((pristine_run / "events.jsonl").read_bytes().splitlines()) == N_EVENTS


def _edit_line(path: Path, index: int) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    event = json.loads(lines[index])
    event["data"] = {**event["data"], "edited": True}  # keeps seq/prev/hash: the hash must catch it
    lines[index] = json.dumps(event, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize("index", range(N_EVENTS))
def test_editing_any_event_line_fails_verify_and_report(fixture_run, index, capsys):
    _edit_line(fixture_run / "events.jsonl", index)
    result = verify_run(fixture_run)
    assert not result.ok
    assert result.first.file == "events.jsonl" and result.first.line == index + 1
    assert main(["verify", str(fixture_run)]) == 3
    err = capsys.readouterr().err
    assert f"events.jsonl:{index + 1}:" in err
    with pytest.raises(VerificationError, match=rf"events\.jsonl:{index + 1}:"):
        write_report(fixture_run, fixture_run / "out")
    assert main(["report", str(fixture_run), "--out", str(fixture_run / "out")]) == 3
    err = capsys.readouterr().err
    assert "refusing to report" in err and "--force" in err
    assert not (fixture_run / "out" / "report.json").exists()


def test_whitespace_only_edit_is_caught(fixture_run):
    path = fixture_run / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = json.dumps(json.loads(lines[3]), sort_keys=True).encode() + b"\n"  # ", " and ": "
    path.write_bytes(b"".join(lines))
    result = verify_run(fixture_run)
    assert not result.ok and result.first.line == 4
    assert "canonical" in result.first.message


def test_deleted_line_is_caught(fixture_run):
    path = fixture_run / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    del lines[5]
    path.write_bytes(b"".join(lines))
    result = verify_run(fixture_run)
    assert not result.ok and result.first.line == 6


def test_tampered_bundle_file(fixture_run):
    (fixture_run / "bundle" / "workspace" / "INSTRUCTIONS.md").write_text("do something else\n")
    result = verify_run(fixture_run)
    assert not result.ok
    assert result.first.file == "bundle"
    assert "workspace/INSTRUCTIONS.md" in result.first.message


def test_bundle_digest_must_match_run_json(fixture_run):
    run = json.loads((fixture_run / "run.json").read_text())
    run["bundle_digest"] = "0" * 64
    (fixture_run / "run.json").write_text(json.dumps(run))
    result = verify_run(fixture_run)
    assert not result.ok and result.first.file == "run.json"
    assert "bundle_digest" in result.first.message


def test_journal_entry_without_event(fixture_run):
    path = fixture_run / "submissions.jsonl"
    with open(path, "a") as handle:
        handle.write(json.dumps({"op": "scored", "id": 99, "ts": "2026-11-30T13:00:00.000Z",
                                 "score": 99.0, "valid": True, "error": None,
                                 "duplicate_of": None, "result": "results/99.json"}) + "\n")
    result = verify_run(fixture_run)
    assert not result.ok
    assert result.first.file == "submissions.jsonl" and result.first.line == 13
    assert "submission 99" in result.first.message


def test_scored_event_missing_from_journal(fixture_run):
    path = fixture_run / "submissions.jsonl"
    lines = [line for line in path.read_text().splitlines()
             if not (json.loads(line)["op"] == "scored" and json.loads(line)["id"] == 3)]
    path.write_text("\n".join(lines) + "\n")
    result = verify_run(fixture_run)
    assert not result.ok
    assert any(p.file == "events.jsonl" and "submission 3" in p.message for p in result.problems)


def test_journal_score_disagrees(fixture_run):
    path = fixture_run / "submissions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if row["op"] == "scored" and row["id"] == 1:
            row["score"] = 99.0
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = verify_run(fixture_run)
    assert not result.ok and result.first.file == "submissions.jsonl"
    assert "journal score 99.0" in result.first.message


def test_results_file_missing_or_changed(fixture_run):
    (fixture_run / "results" / "3.json").unlink()
    result = json.loads((fixture_run / "results" / "5.json").read_text())
    result["score"] = 77.0
    (fixture_run / "results" / "5.json").write_text(json.dumps(result))
    problems = [str(p) for p in verify_run(fixture_run).problems]
    assert any(p.startswith("results/3.json: missing") for p in problems)
    assert any(p.startswith("results/5.json: score 77.0") for p in problems)


def test_force_reports_an_unverified_run_loudly(fixture_run, capsys):
    _edit_line(fixture_run / "events.jsonl", 7)
    out = fixture_run / "out"
    assert main(["report", str(fixture_run), "--out", str(out), "--force"]) == 0
    assert "FAILED verification" in capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["verification"]["ok"] is False and report["verification"]["forced"] is True
    assert report["verification"]["problems"][0]["line"] == 8
    html = (out / "report.html").read_text()
    assert 'id="unverified"' in html and "FAILED VERIFICATION" in html
    assert "FAILED VERIFICATION" in (out / "report.md").read_text()


def test_not_a_run_directory(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 1
    assert "not a run directory" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nope")]) == 1


def test_agent_bundle_copy_is_verified(fixture_run, maker):
    from a2c.canonical import sha256_file, sha256_json
    from a2c.contracts.bundle import bundle_digest

    agent = fixture_run / "agent"
    agent.mkdir(exist_ok=True)
    (agent / "launch.sh").write_text("#!/usr/bin/env bash\nexec python -m a2c.agents.reference.sft\n")
    files = {"launch.sh": sha256_file(agent / "launch.sh")}
    spec_hash = sha256_json({"id": "ref-sft"})
    digest = bundle_digest(spec_hash, files)
    (agent / "agent.json").write_text(json.dumps({"format": "a2c-bundle/1", "kind": "Agent",
                                                  "id": "ref-sft", "spec_hash": spec_hash,
                                                  "files": files, "digest": digest}))
    run = json.loads((fixture_run / "run.json").read_text())
    run["agent_digest"] = digest
    (fixture_run / "run.json").write_text(json.dumps(run))
    maker.reseal(fixture_run)   # the record written so, by the key holder
    result = verify_run(fixture_run)
    assert result.ok and "agent bundle" in [c.name for c in result.checks]
    (agent / "launch.sh").write_text("#!/usr/bin/env bash\nexec python -m evil\n")
    result = verify_run(fixture_run)
    assert not result.ok and result.first.file == "agent/launch.sh"
