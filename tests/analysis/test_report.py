"""`a2c report` on the fixture run: content, schema, rendering, modes, edge cases."""

from __future__ import annotations

import json
import re
import shutil

import jsonschema
import pytest

from a2c.analysis.report import build_report, report_schema, validate_report, write_report
from a2c.analysis.report_doc import Report
from a2c.analysis.rows import SubmissionRow
from a2c.cli import main


@pytest.fixture(scope="module")
def written(pristine_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    report, paths = write_report(pristine_run, out)
    return report, paths


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(report_schema())


def test_files_written_and_json_validates(written):
    report, paths = written
    for path in (*paths.listed, paths.svg):
        assert path.is_file() and path.stat().st_size > 500
    on_disk = json.loads(paths.json.read_text())
    validate_report(on_disk)
    assert on_disk == json.loads(json.dumps(report))


def test_report_json_reads_back_as_the_typed_report_unchanged(written):
    """report.json parsed into the typed Report (analysis/report_doc.py) writes the same JSON,
    key order and all, and its sections read as records."""
    _, paths = written
    text = paths.json.read_text()
    typed = Report.from_dict(json.loads(text))
    assert json.dumps(typed.to_dict(), indent=2, ensure_ascii=False) + "\n" == text
    assert typed.scores.best == 52.0 and typed.metrics.n_submissions == 6
    assert all(isinstance(s, SubmissionRow) for s in typed.submissions)
    assert typed.route.available and isinstance(typed.route.methods, tuple)


def test_header(written):
    report, _ = written
    run = report["run"]
    assert run["task"] == "arith" and run["level"] == 1 and run["agent"] == "ref-sft"
    assert run["driver"] == "scripted" and run["mode"] == "free"
    assert run["base_model"] == "builtin:smollm2-135m-instruct"
    assert run["budget"]["wall_clock_s"] == 3600 and run["isolation"] == "none"
    assert len(run["bundle_digest"]) == 64
    assert report["producer"]["spec_hash"] == run["spec_hash"]
    assert report["producer"]["run_a2c_version"] == "0.1.0"
    assert report["verification"]["ok"] is True and report["verification"]["forced"] is False


def test_scores_and_submissions(written):
    report, _ = written
    assert report["scores"] == {"baseline": 30.0, "best": 52.0, "best_submission": "5",
                                "final": 52.0, "last_valid": 52.0, "improvement": 22.0,
                                "scoring_policy": "best"}
    subs = report["submissions"]
    assert [s["valid"] for s in subs] == [True, False, True, False, True, False]
    assert [s["t_s"] for s in subs] == [600.0, 900.0, 1500.0, 2100.0, 2700.0, 3300.0]
    assert [s["best_so_far"] for s in subs] == [41.0, 41.0, 47.5, 47.5, 52.0, 52.0]
    assert subs[1]["base_copy"] is True
    assert subs[0]["ci95"] == [36.2, 45.8]
    assert all(len(s["snapshot"]) == 40 for s in subs)


def test_process_metrics(written):
    m = written[0]["metrics"]
    assert m["n_submissions"] == 6 and m["n_valid"] == 3 and m["valid_submission_rate"] == 0.5
    assert m["first_valid_index"] == 1 and m["first_valid_delay_s"] == 600.0
    assert m["first_improvement_index"] == 1 and m["time_to_first_improvement_s"] == 600.0
    assert m["best_index"] == 5 and m["time_to_best_s"] == 2700.0
    assert m["monotonicity"] == 1.0 and m["n_improvements"] == 3
    assert m["base_model_copies"] == 1 and m["duplicates"] == 0
    assert m["budget_used_share"] == pytest.approx(3590 / 3600, abs=1e-3)
    assert m["submissions_used_share"] == 0.6
    assert m["gap_last_submission_to_end_s"] == 289.0  # to agent_exited
    assert m["n_snapshots"] == 7


def test_training_route_from_code(written):
    route = written[0]["route"]
    assert route["available"] is True
    assert route["methods"] == ["GRPO", "SFT"] and route["adapters"] == ["LoRA"]
    per = {p["id"]: p for p in route["per_submission"]}
    assert per["1"]["methods"] == ["SFT"] and per["1"]["attribution"] == "output_path"
    assert per["1"]["hyperparameters"]["learning_rate"] == [4e-05]
    assert per["1"]["hyperparameters"]["epochs"] == [1]
    assert per["1"]["hyperparameters"]["lora_rank"] == [16]
    assert per["3"]["hyperparameters"]["epochs"] == [3]
    # GRPO started from the SFT model: both scripts are on the route of submission 5.
    assert per["5"]["methods"] == ["GRPO", "SFT"]
    assert per["5"]["files"] == ["train_grpo.py", "train_sft.py"]
    assert per["5"]["hyperparameters"]["beta"] == [0.04]
    assert per["5"]["hyperparameters"]["num_generations"] == [8]
    assert any(e["kind"] == "call" and "GRPOTrainer" in e["text"] for e in per["5"]["evidence"])
    assert route["compliance"]["verdict"] == "n/a"


def test_timeline(written):
    timeline = written[0]["timeline"]
    assert [t["to_id"] for t in timeline] == ["1", "2", "3", "4", "5", "6"]
    assert timeline[0]["from_id"] is None and timeline[0]["from_commit"]  # the periodic snapshot
    third = timeline[2]
    assert third["score_change"] == 6.5 and third["score_before"] == 41.0
    changed = {f["path"]: f for f in third["files_changed"]}
    assert changed["train_sft.py"]["status"] == "modified"
    assert changed["copy_base.sh"]["status"] == "removed"
    assert any(line == "+EPOCHS = 3" for line in third["diff_excerpt"])
    assert third["diff_excerpt"][0] == "--- a/copy_base.sh"  # code first, notes after
    assert timeline[3]["valid"] is False and timeline[3]["score_change"] is None


def test_failure_taxonomy(written):
    report = written[0]
    by_sub = {f["submission_id"]: f for f in report["failures"] if f["submission_id"]}
    assert by_sub["2"]["category"] == "base_copy"
    assert by_sub["4"]["category"] == "load_failure"
    assert by_sub["6"]["category"] == "timeout"
    assert any(e["source"] == "logs/grader.log" and "submission 4" in e["text"]
               for e in by_sub["4"]["evidence"])
    assert report["failure_counts"] == {"base_copy": 1, "load_failure": 1, "rate_limited": 1,
                                        "timeout": 1}


def test_outcomes_of_best(written):
    o = written[0]["outcomes"]
    assert o["submission_id"] == "5" and o["available"] and o["n_items"] == 20
    assert o["unit"] == "item" and 0 < o["n_correct"] < 20
    assert o["fixed"] is not None and o["broken"] is not None
    assert 1 <= len(o["examples"]) <= 6
    assert {"prompt", "output", "gold"} <= set(o["examples"][0])


def test_markdown_and_html(written):
    _, paths = written
    md = paths.md.read_text()
    for heading in ("## Scores", "## Process metrics", "## Training route", "## Timeline",
                    "## Failures", "## Outcomes of the best submission"):
        assert heading in md
    assert "![Score over time](score_over_time.svg)" in md
    html = paths.html.read_text()
    assert "<script src" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    svg = re.search(r"<svg .*?</svg>", html, re.DOTALL).group(0)
    assert len(re.findall(r'class="sub valid', svg)) == 3
    assert len(re.findall(r'class="sub invalid', svg)) == 3
    assert 'class="baseline"' in svg and 'class="best"' in svg
    assert svg.count("<line x1=") >= 9  # CI whiskers present
    assert paths.svg.read_text().startswith("<svg xmlns=")


def test_report_is_deterministic(pristine_run, maker, tmp_path):
    again = maker.make_run(tmp_path / "again")
    assert (again / "events.jsonl").read_bytes() == (pristine_run / "events.jsonl").read_bytes()
    a = build_report(pristine_run)
    b = build_report(again)
    a["run"].pop("run_id"), b["run"].pop("run_id")
    assert a["submissions"] == b["submissions"] and a["timeline"] == b["timeline"]


@pytest.mark.parametrize("mode,verdict,offending", [
    ("sft-only", "violates", ["GRPO"]),
    ("rl-only", "violates", ["SFT"]),
])
def test_mode_compliance(maker, tmp_path, mode, verdict, offending):
    run = maker.make_run(tmp_path / mode, mode=mode)
    report = build_report(run)
    assert report["route"]["compliance"]["verdict"] == verdict
    assert report["route"]["compliance"]["offending"] == offending
    per = {p["id"]: p["compliance"]["verdict"] for p in report["route"]["per_submission"]}
    if mode == "sft-only":
        assert per["1"] == "complies" and per["5"] == "violates"


def test_sft_only_run_that_complies(maker, tmp_path):
    run = maker.make_run(tmp_path / "sft", n=3, mode="sft-only")
    report = build_report(run)
    assert report["route"]["compliance"]["verdict"] == "complies"


def test_no_snapshots_and_no_submissions(maker, tmp_path):
    run = maker.make_run(tmp_path / "none", n=0)
    shutil.rmtree(run / "snapshots.git")
    report = build_report(run)
    validate_report(report)
    assert report["route"]["available"] is False
    assert report["metrics"]["n_submissions"] == 0 and report["outcomes"] is None
    assert [f["category"] for f in report["failures"]] == ["no_submission"]
    assert main(["report", str(run)]) == 0
    assert (run / "report" / "report.html").is_file()


def test_cli_report_default_out(fixture_run, capsys):
    assert main(["report", str(fixture_run)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(fixture_run / "report" / n) for n in
                       ("report.json", "report.md", "report.html")]
    # Writing the report into the run directory does not break verification.
    assert main(["verify", str(fixture_run)]) == 0


def test_first_submission_is_diffed_against_the_shipped_workspace(maker, tmp_path):
    run = maker.make_run(tmp_path / "nosnap", n=3, initial_snapshot=False)
    first = build_report(run)["timeline"][0]
    assert first["from_commit"] is None
    paths = [f["path"] for f in first["files_changed"]]
    assert "INSTRUCTIONS.md" not in paths  # unchanged from the bundle: not the agent's work
    assert "train_sft.py" in paths and paths[0] == "eval.py"


def test_run_json_base_model_object(fixture_run):
    path = fixture_run / "run.json"
    run = json.loads(path.read_text())
    run["base_model"] = {"fingerprint": "f" * 64, "path": "/cache/models/tiny",
                         "spec": {"builtin": "tiny"}}
    run["deadline"] = 1796083200.0 + 3600  # unix seconds, as the runtime writes it
    path.write_text(json.dumps(run))
    report = build_report(fixture_run)
    assert report["run"]["base_model"] == "builtin:tiny"
    assert report["run"]["deadline"].endswith("Z")


def test_times_count_from_the_agent_start(maker, tmp_path):
    run = maker.make_run(tmp_path / "clock", agent_start=100.0)
    report = build_report(run)
    assert report["submissions"][0]["t_s"] == 500.0
    assert report["run"]["agent_time_s"] == 3589.0 - 100.0
    assert report["metrics"]["budget_used_share"] == pytest.approx(3489 / 3600, abs=1e-3)
    assert report["metrics"]["time_to_best_s"] == 2600.0
    assert report["metrics"]["gap_last_submission_to_end_s"] == 3589.0 - 3300.0


def test_route_of_a_launched_module(maker, tmp_path):
    """Reference agents train from a module outside the workspace, named in their launcher."""
    import importlib.util

    if importlib.util.find_spec("a2c.agents.reference.sft") is None:
        pytest.skip("no reference SFT agent installed")
    run = maker.make_run(tmp_path / "module", n=3, with_code=False)
    assert build_report(run)["route"]["methods"] == []
    (run / "agent").mkdir(exist_ok=True)
    (run / "agent" / "launch.sh").write_text(
        "#!/usr/bin/env bash\n# python -m a2c.not.this\nexec python -m a2c.agents.reference.sft\n")
    route = build_report(run)["route"]
    assert route["methods"] == ["SFT"]
    first = route["per_submission"][0]
    assert first["attribution"] == "launched"
    assert first["files"][0] == "module:a2c.agents.reference.sft"


def _set_started(run_dir, **values):
    """Change run_started's data (the fixture's `reseal` re-chains and re-authenticates)."""
    path = run_dir / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    events[0]["data"].update(values)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def test_l3_episode_outcomes(fixture_run, maker):
    path = fixture_run / "results" / "5.json"
    result = json.loads(path.read_text())
    for item in result["items"]:
        item["trajectory"] = [{"action": f"go {d}", "observation": "a room", "reward": 0}
                              for d in ("north", "east", "south", "west", "up", "down", "in")]
        item["reward"] = 1.0 if item["correct"] else 0.0
    path.write_text(json.dumps(result))
    run = json.loads((fixture_run / "run.json").read_text())
    run["level"] = 3
    (fixture_run / "run.json").write_text(json.dumps(run))
    _set_started(fixture_run, level=3)
    maker.reseal(fixture_run)   # a record written so (sealed by the key holder)
    report, paths = write_report(fixture_run, fixture_run / "out")
    o = report["outcomes"]
    assert o["unit"] == "episode"
    assert o["examples"][0]["steps"] == 7 and len(o["examples"][0]["trajectory"]) == 7
    assert o["examples"][0]["trajectory"][0] == {"action": "go north", "observation": "a room",
                                                 "reward": 0.0, "output": None}
    assert "7 steps, reward 1.00" in paths.html.read_text()
    assert "episodes correct" in paths.md.read_text()


def test_html_escapes_agent_text(fixture_run, maker):
    path = fixture_run / "submissions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["note"] = "<script>alert('x')</script> & more"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    maker.reseal(fixture_run)   # a record written so (sealed by the key holder)
    _, paths = write_report(fixture_run, fixture_run / "out")
    html = paths.html.read_text()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more" in html
