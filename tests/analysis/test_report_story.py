"""Issue 25: the record tells one story. An interrupted and resumed run's report names the
interruption and the time lost, and the time the agent actually ran; a budget left unset reads
"unlimited", never Python's `None`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from a2c.analysis.record import RunRecord
from a2c.analysis.report import build_report
from a2c.analysis.report_pages import render_html, render_markdown
from a2c.analysis.summary import Stretches, agent_stretches
from a2c.timefmt import iso_utc

T0 = 1_800_000_000.0


def _record(events):
    evs = [{"ts": iso_utc(T0 + t), "type": kind, "data": data} for t, kind, data in events]
    exits = [t for t, kind, _ in events if kind == "agent_exited"]
    record = RunRecord(root=Path("."), run={}, events=evs, event_problems=[], journal=[],
                       journal_problems=[])
    record.clock_start = T0          # the budget clock from the run's start, for round numbers
    record.agent_ended_at = T0 + (exits[-1] if exits else 1000)
    return record


def test_an_interruption_and_the_time_lost():
    record = _record([
        (0, "run_started", {}), (10, "agent_started", {"resumed": False}),
        (100, "submission_received", {"id": 1}),
        (300, "snapshot", {}),                                 # the runtime dies after this
        (500, "run_resumed", {"resume": 1}), (510, "agent_started", {"resumed": True}),
        (700, "agent_exited", {"returncode": 0}), (720, "run_finished", {})])
    out = agent_stretches(record)
    assert out.agent_active_s == (300 - 10) + (700 - 510)
    [gap] = out.interruptions
    assert gap["resume"] == 1 and gap["t_s"] == 300 and gap["lost_s"] == 200
    assert gap["agent_relaunched"] is True


def test_no_interruption_and_no_agent():
    plain = _record([(0, "run_started", {}), (10, "agent_started", {}),
                     (400, "agent_exited", {}), (410, "run_finished", {})])
    assert agent_stretches(plain) == Stretches([], 390)
    none = _record([(0, "run_started", {}), (5, "run_finished", {})])
    assert agent_stretches(none).agent_active_s is None


def test_report_pages_say_unlimited_and_name_the_interruption(fixture_run):
    report = build_report(fixture_run)
    assert report["run"]["interruptions"] == []
    report["run"]["budget"] = {**report["run"]["budget"], "max_submissions": None}
    report["run"]["interruptions"] = [{"resume": 1, "stopped_at": "2027-01-15T08:00:00Z",
                                       "resumed_at": "2027-01-15T08:03:20Z", "t_s": 300.0,
                                       "lost_s": 200.0, "agent_relaunched": True}]
    report["run"]["agent_active_s"] = 480.0
    md, html = render_markdown(report), render_html(report)
    for page in (md, html):
        assert "max_submissions=unlimited" in page and "max_submissions=None" not in page
        assert "resume #1: stopped at" in page and "agent relaunched" in page
        assert "of which it ran" in page


def test_hyperparameters_are_what_ran_never_source_text():
    from a2c.analysis.attribution import _logged_hps
    from a2c.analysis.training_methods import analyse_file

    source = ('import os\nfrom trl import SFTConfig\n'
              'LR = float(os.environ.get("SFT_LR", "5e-5"))\n'
              'args = SFTConfig(learning_rate=float(os.environ.get("SFT_LR", "5e-5")), '
              'max_steps=25)\n')
    found = {hp.name: hp.value for hp in analyse_file("train_sft.py", source).hyperparameters}
    assert found.get("max_steps") == 25
    assert all("environ" not in str(v) for v in found.values()), found
    blobs = {"b1": '{"method": "SFT", "steps": 4, "max_steps": 25, "learning_rate": 5e-05}',
             "b2": "not json"}
    repo = SimpleNamespace(text=blobs.get)
    assert _logged_hps(repo, {"hyperparameters.json": "b1"}) == {
        "learning_rate": [5e-05], "max_steps": [25], "steps": [4]}
    assert _logged_hps(repo, {"hyperparameters.json": "b2"}) is None
    assert _logged_hps(repo, {"train.py": "b1"}) is None
