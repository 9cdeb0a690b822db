"""Issue 25: the grader's copies cost disk once. A scored copy that can no longer count (neither
the best nor the last valid submission, nor the original of a duplicate of either) is removed, a
`submission_pruned` event names it, and the journal keeps its hash; the copy-on-write intake
hashes a clone exactly as it hashes a byte copy."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from service_helpers import make_model

from a2c.canonical import sha256_tree
from a2c.contracts.events import read_events
from a2c.contracts.journal import JournalReceived, JournalScored
from a2c.runtime.grader_service import intake, read_journal
from a2c.runtime.grader_service.pruning import copies_to_keep
from a2c.runtime.grader_service.submission import Submission


def _sub(status, score=None, valid=True, duplicate_of=None):
    sub = Submission(received=JournalReceived(id=0), status=status)
    if status in ("scored", "invalid"):
        sub.scored = JournalScored(score=score, valid=valid, duplicate_of=duplicate_of)
    return sub


def test_keep_best_last_pending_and_originals_of_duplicates():
    subs = {1: _sub("scored", 10), 2: _sub("scored", 50), 3: _sub("scored", 50),
            4: _sub("invalid", None, valid=False), 5: _sub("scored", 20),
            6: _sub("queued"), 7: _sub("running")}
    assert copies_to_keep(subs) == {2, 5, 6, 7}          # best (earliest on a tie), last, pending
    subs[8] = _sub("scored", 10, duplicate_of=1)           # the last valid is a duplicate of 1
    assert copies_to_keep(subs) == {1, 2, 6, 7, 8}
    assert copies_to_keep({1: _sub("invalid", valid=False)}) == set()
    assert copies_to_keep({}) == set()


def test_service_prunes_copies_that_can_no_longer_count(service):
    handle, run = service()
    client = handle.client()
    ids = []
    for name, score in (("a", 10), ("b", 50), ("c", 30), ("d", 20)):
        make_model(run / "workspace" / "output" / name, content=name * 1000, SCORE=score)
        ids.append(client.submit(f"output/{name}")["id"])
        assert handle.wait_idle(30)
    copies = run / "grader" / "submissions"
    assert sorted(int(p.name) for p in copies.iterdir()) == [ids[1], ids[3]]   # best, last
    pruned = [e["data"] for e in read_events(run / "events.jsonl")
              if e["type"] == "submission_pruned"]
    received = {e["id"]: e["weights_hash"] for e in read_journal(run) if e["op"] == "received"}
    assert [p["id"] for p in pruned] == [ids[0], ids[2]]
    assert all(p["weights_hash"] == received[p["id"]] and p["bytes"] > 1000 for p in pruned)
    # still listed and scored: only the bytes are gone
    subs = {s["id"]: s for s in client.list()["submissions"]}
    assert subs[ids[0]]["score"] == 10.0 and subs[ids[2]]["score"] == 30.0


def test_clone_is_hashed_like_a_copy(tmp_path, monkeypatch):
    out = tmp_path / "output"
    model = make_model(out / "m", content="x" * 5000)
    plain = intake.copy_submission(model, out, tmp_path / "plain", shown="m", limit="/o",
                                   max_bytes=1 << 20, max_files=10)

    def fake_clone(src_fd, dst_fd):           # what FICLONE does: the bytes, at this instant
        os.sendfile(dst_fd, src_fd, 0, os.fstat(src_fd).st_size)
        return True

    monkeypatch.setattr(intake, "_clone", fake_clone)
    cloned = intake.copy_submission(model, out, tmp_path / "cloned", shown="m", limit="/o",
                                    max_bytes=1 << 20, max_files=10)
    assert cloned.folder_hash == plain.folder_hash == sha256_tree(model)
    assert cloned.bytes == plain.bytes and cloned.weights_hash == plain.weights_hash
    shutil.rmtree(tmp_path / "cloned")
    small = intake.copy_submission
    try:
        small(model, out, tmp_path / "cloned", shown="m", limit="/o", max_bytes=100,
              max_files=10)
    except intake.Refusal as exc:
        assert exc.code == "submission_too_large"
    else:
        raise AssertionError("a clone over max_submission_bytes was accepted")
    assert not Path(tmp_path / "cloned").exists()


def test_clone_falls_back_to_a_copy_where_unsupported(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"abc")
    with open(a, "rb") as src, open(b, "wb") as dst:
        ok = intake._clone(src.fileno(), dst.fileno())
    # ext4/tmpfs: False (the caller copies); btrfs/XFS: True and the clone holds the bytes
    assert ok is False or b.read_bytes() == b"abc"
