"""The typed records: payloads, the journal's torn-line repair, the one bundle verification."""

from __future__ import annotations

import json
import shutil

import pytest

from a2c.canonical import sha256_file, sha256_json
from a2c.contracts.bundle import (
    AgentBundle,
    BundleVerificationError,
    TaskBundle,
    bundle_digest,
    load_bundle,
)
from a2c.contracts.events import (
    EVENT_TYPES,
    EventLog,
    SubmissionScored,
    payload_of,
    read_events,
    verify_events,
)
from a2c.contracts.journal import Journal, JournalReceived, JournalScored, journal_state
from a2c.contracts.submission_errors import CODES, SubmissionError
from a2c.errors import BundleError
from a2c.paths import project_root


def test_submission_scored_carries_copy_of_base_and_code(tmp_path):
    log = EventLog(tmp_path / "events.jsonl")
    log.emit(SubmissionScored(id=1, score=None, valid=False, error="boom",
                              code=SubmissionError.EVAL_CRASHED.value, copy_of_base=False))
    log.emit(SubmissionScored(id=2, score=9.0, valid=True, duplicate_of="baseline",
                              copy_of_base=True))
    assert verify_events(tmp_path / "events.jsonl").ok
    first, second = read_events(tmp_path / "events.jsonl")
    assert first["data"]["code"] == "eval_crashed" and first["data"]["copy_of_base"] is False
    assert second["data"]["copy_of_base"] is True and second["data"]["code"] is None
    typed = payload_of(second)
    assert isinstance(typed, SubmissionScored) and typed.copy_of_base is True


def test_event_types_cover_the_documented_ones():
    doc = (project_root() / "docs" / "contracts.md").read_text(encoding="utf-8")
    for name in EVENT_TYPES:
        assert f"`{name}`" in doc, name


def test_codes_are_strings():
    assert SubmissionError("too_soon") is SubmissionError.TOO_SOON
    assert json.dumps({"code": SubmissionError.TOO_SOON}) == '{"code": "too_soon"}'
    assert "eval_timeout" in CODES


def test_journal_torn_last_line_is_repaired(tmp_path):
    path = tmp_path / "submissions.jsonl"
    journal = Journal(path)
    journal.append(JournalReceived(id=1, ts="t0", model_path="output/a", weights_hash="h"))
    journal.append(JournalScored(id=1, ts="t1", score=3.0, valid=True, result="results/1.json",
                                 copy_of_base=False))
    with open(path, "ab") as handle:
        handle.write(b'{"op": "received", "id": 2, "ts"')   # a crash mid-write
    assert journal_state(path)["pending"] == []              # readers skip it...
    logged = []
    again = Journal(path, log=logged.append)                 # ...and the writer cuts it
    assert path.read_bytes().endswith(b"\n") and len(path.read_bytes().splitlines()) == 2
    assert logged and "torn" in logged[0]
    again.append({"op": "received", "id": 2, "ts": "t2"})
    state = journal_state(tmp_path)
    assert state["pending"] == ["2"] and state["scored"]["1"]["score"] == 3.0
    assert [e["op"] for e in again.read()] == ["received", "scored", "received"]


def _agent_bundle(root):
    root.mkdir()
    (root / "launch.sh").write_text("#!/usr/bin/env bash\nexec true\n")
    manifest = AgentBundle.create("a", {"id": "a"}, {"launch.sh": sha256_file(root / "launch.sh")},
                                  "0.1.0")
    (root / "agent.json").write_text(json.dumps(manifest.to_dict()))
    return root


def test_one_verification_refuses_a_tampered_agent_bundle(tmp_path):
    root = _agent_bundle(tmp_path / "agent")
    bundle = load_bundle(root, kind="Agent")
    assert bundle.agent.to_dict() == {"id": "a"} and bundle.digest == bundle_digest(
        sha256_json({"id": "a"}), {"launch.sh": sha256_file(root / "launch.sh")})
    (root / "prompt.rendered.md").write_text("a run adds this\n")   # allowed for agents
    load_bundle(root, kind="Agent")
    (root / "launch.sh").write_text("#!/usr/bin/env bash\nexec evil\n")
    with pytest.raises(BundleVerificationError) as info:
        load_bundle(root, kind="Agent")
    assert info.value.problems == [("launch.sh", "content differs from the manifest")]
    assert "agent bundle failed verification" in str(info.value)
    with pytest.raises(BundleError, match="not a bundle"):
        load_bundle(root, kind="Task")


def test_one_verification_refuses_a_tampered_task_bundle(tmp_path):
    root = tmp_path / "arith"
    shutil.copytree(project_root() / "generated" / "arith", root)
    bundle = load_bundle(root)
    assert bundle.kind == "Task" and isinstance(bundle.record, TaskBundle)
    assert bundle.record.to_dict() == bundle.manifest
    (root / "workspace" / "INSTRUCTIONS.md").write_text("do something else\n")
    (root / "extra.txt").write_text("added\n")
    with pytest.raises(BundleVerificationError) as info:
        load_bundle(root, kind="Task")
    assert dict(info.value.problems) == {
        "workspace/INSTRUCTIONS.md": "content differs from the manifest",
        "extra.txt": "not in the manifest"}
    assert "bundle failed verification" in str(info.value)
