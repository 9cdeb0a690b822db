"""The grader service writes `code` and `copy_of_base` into the journal and the events (the
contract in a2c.contracts); the analysis reads them back without guessing."""

from __future__ import annotations

from service_helpers import make_model

from a2c.analysis.record import RunRecord
from a2c.contracts.events import read_events
from a2c.contracts.journal import journal_state
from a2c.runtime.grader_service import start_grader_service as start_service


def test_copy_of_base_and_codes_travel(make_run, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EVAL_LOG", str(tmp_path / "evals.log"))
    base = make_model(tmp_path / "base", content="base weights", SCORE=9)
    run = make_run(base_model=str(base), baseline=True)
    handle = start_service(run)
    try:
        client = handle.client()
        make_model(run / "workspace" / "output" / "copy", content="base weights", SCORE=9)
        make_model(run / "workspace" / "output" / "good", content="new weights", SCORE=20)
        make_model(run / "workspace" / "output" / "bad", content="bad weights", CRASH=3)
        ids = [client.submit(f"output/{name}")["id"] for name in ("copy", "good", "bad")]
        assert handle.wait_idle(30)
        assert client.status(ids[2])["code"] == "eval_crashed"
    finally:
        handle.kill()
    scored = {e["data"]["id"]: e["data"] for e in read_events(run / "events.jsonl")
              if e["type"] == "submission_scored"}
    assert scored[ids[0]]["copy_of_base"] is True and scored[ids[0]]["code"] is None
    assert scored[ids[1]]["copy_of_base"] is False and scored[ids[1]]["valid"] is True
    assert scored[ids[2]]["code"] == "eval_crashed" and scored[ids[2]]["valid"] is False
    journal = journal_state(run)["scored"]
    assert journal[str(ids[0])]["copy_of_base"] is True
    assert journal[str(ids[2])]["code"] == "eval_crashed"
    subs = {s.id: s for s in RunRecord.load(run).submissions}
    assert subs[str(ids[0])].base_copy and not subs[str(ids[1])].base_copy
    assert subs[str(ids[2])].code == "eval_crashed"
