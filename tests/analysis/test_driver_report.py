"""The driver record in the analysis: the report's driver section (JSON, Markdown, HTML steps),
`a2c verify` over driver/blobs, the agent_failed / no_submission statuses, the leaderboard's
tokens / cost / cost-per-point columns, and level-3 episodes rendered as steps."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

from a2c.analysis.leaderboard import build_leaderboard, render_leaderboard
from a2c.analysis.report import build_report, validate_report, write_report
from a2c.analysis.verify import verify_run
from a2c.cli import main
from a2c.contracts.events import EventLog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "trajectory"))
import driver_record as dr  # noqa: E402


@pytest.fixture(scope="module")
def driven(maker, tmp_path_factory):
    """The fixture run with a Claude Code driver record whose two ./submit calls precede
    submissions 1 and 2, and a cost budget exhausted at 960 s."""
    run = maker.make_run(tmp_path_factory.mktemp("driven") / "run")
    return dr.add_to_run(run, maker, "claude-code", stream=True, exhausted_at=960.0)


@pytest.fixture
def driven_copy(driven, tmp_path):
    dest = tmp_path / "run"
    shutil.copytree(driven, dest, symlinks=True)
    return dest


@pytest.fixture(scope="module")
def written(driven, tmp_path_factory):
    return write_report(driven, tmp_path_factory.mktemp("driven-report"))


def test_driver_section(written):
    report, _ = written
    validate_report(report)
    d = report["driver"]
    assert d["models"] == {"claude-sonnet-4-5": 6} and d["calls"] == 6 and d["errors"] == 0
    usage = [dr.usage_of(k) for k in range(6)]
    assert d["input_tokens"] == sum(u["input_tokens"] for u in usage)
    assert d["output_tokens"] == sum(u["output_tokens"] for u in usage)
    assert d["cached_tokens"] == sum(u["cache_read_tokens"] for u in usage)
    assert d["cost_usd"] == pytest.approx(sum(dr.cost_of(u) for u in usage))
    assert d["tokens"] == sum(sum(u.values()) for u in usage)
    assert d["budget_exhausted"] == [{"limit": "cost_usd", "budget": 0.02, "used": 0.021,
                                      "t_s": 960.0}]
    assert d["tool_calls_by_kind"] == {"edit": 1, "shell": 4}
    assert d["tool_calls_by_name"] == {"Bash": 4, "Write": 1}
    assert [c["command"] for c in d["shell_commands"]] == [
        "ls -la", "python train.py", "./submit output/m1",
        "python train.py --epochs 3 && ./submit output/m2"]
    assert [c["submits"] for c in d["shell_commands"]] == [False, False, True, True]
    first, second = d["submissions"][:2]
    assert first["id"] == "1" and first["calls"] == 4 and first["steps"][0] == 1
    steps = {s["step_id"]: s for s in d["steps"]}
    assert "./submit output/m1" in steps[first["submit_step"]]["tool_calls"][0]["text"]
    assert second["calls"] == 1 and second["submit_step"] == second["steps"][-1]
    assert "./submit output/m2" in steps[second["submit_step"]]["tool_calls"][0]["text"]
    assert steps[first["submit_step"]]["submission"] == "1"
    assert [s["source"] for s in d["steps"][:2]] == ["system", "user"]
    assert d["after_last_submission"]["calls"] == 0       # the last call precedes submission 3
    assert sum(p["calls"] for p in d["submissions"]) == d["calls"]
    assert d["steps"][0]["long"] and d["steps"][0]["message_truncated"]


def test_driver_failures(written, driven_copy):
    report, _ = written
    budget = [f for f in report["failures"] if f["category"] == "driver_budget"]
    assert budget and budget[0]["message"].startswith("cost_usd: 0.021 used of 0.02")
    assert not [f for f in report["failures"] if f["category"] == "driver_errors"]
    log = EventLog(driven_copy / "events.jsonl")
    for status, error in ((502, "upstream_unreachable"), (402, "budget"), (429, None)):
        log.append("driver_call", {"seq": 90, "wire": "anthropic", "path": "/v1/messages",
                                   "status": status, "error": error})
    errors = next(f for f in build_report(driven_copy)["failures"]
                  if f["category"] == "driver_errors")
    assert errors["message"] == "3 call(s): HTTP 429 ×1, budget ×1, upstream_unreachable ×1"


def test_driver_section_markdown_and_html(written):
    _, paths = written
    md = paths.md.read_text()
    assert "## Driver model" in md and "claude-sonnet-4-5 (6 calls)" in md
    # a scripted driver is named as such: no model ran, the calls are priced as one
    assert ("| Driver model | scripted (scripted driver, priced as claude-sonnet-4-5; 6 calls) |"
            in md)
    assert "1. `ls -la` (step #" in md and "**submit**" in md
    assert "**cost_usd**: 0.021 of 0.02" in md
    html = paths.html.read_text()
    assert '<h2 id="driver">Driver model</h2>' in html and "budget exhausted" in html
    assert "scripted (scripted driver, priced as <b>claude-sonnet-4-5</b>; 6 calls)" in html
    assert html.count('<div class="step agent"') == 6
    assert '<div class="step system" id="step-1">' in html
    assert '<details class="long">' in html           # the long system prompt is collapsed
    assert '<ol class="commands" id="shell-commands">' in html
    assert '<span class="badge submit">submit</span>' in html
    assert '<details class="obs"><summary>output (' in html   # observations collapsed
    assert 'href="#step-' in html and 'id="driver-submissions"' in html


def test_report_without_driver(pristine_run, tmp_path):
    report, paths = write_report(pristine_run, tmp_path)
    assert report["driver"] is None
    assert "No driver calls recorded" in paths.html.read_text()
    assert "No driver calls recorded" in paths.md.read_text()


def test_verify_covers_driver_blobs(driven_copy):
    ok = verify_run(driven_copy)
    assert ok.ok, ok.problems
    check = next(c for c in ok.checks if c.name == "driver record")
    assert check.ok and check.detail == "12 call bodies match their hashes"
    blobs = sorted((driven_copy / "driver" / "blobs").iterdir())
    altered, missing = blobs[0], blobs[1]
    altered.write_bytes(altered.read_bytes() + b" ")
    missing.unlink()
    result = verify_run(driven_copy)
    assert not result.ok
    messages = {p.file: p.message for p in result.problems}
    assert messages[f"driver/blobs/{altered.name}"].startswith("altered")
    assert messages[f"driver/blobs/{missing.name}"].startswith("missing, but driver call")
    assert main(["verify", str(driven_copy)]) != 0


def test_trajectory_json_is_verified(driven_copy):
    from a2c.analysis.trajectory import write_trajectory

    path = write_trajectory(driven_copy)        # after the run's seal, as the CLI writes it
    result = verify_run(driven_copy)
    assert result.ok, result.problems
    assert any(c.name == "trajectory" and c.ok for c in result.checks)
    report = build_report(driven_copy)
    assert report["driver"]["trajectory_file"] == "trajectory.json"
    path.write_text(path.read_text().replace("ls -la", "ls -lh"))
    edited = verify_run(driven_copy)
    assert [(p.file, p.message) for p in edited.problems] == [
        ("trajectory.json", "step 3 differs from what the driver record builds")]
    data = json.loads(path.read_text())
    data["extra"]["a2c_version"] = "0.0.1"                       # another version's file
    data["final_metrics"]["total_cost_usd"] = 0.0
    path.write_text(json.dumps(data))
    assert "total_cost_usd" in verify_run(driven_copy).first.message
    path.write_text("{")
    assert "not readable JSON" in verify_run(driven_copy).first.message


@pytest.mark.parametrize("status", ["agent_failed", "no_submission"])
def test_new_statuses(fixture_run, maker, status):
    run = json.loads((fixture_run / "run.json").read_text())
    run["status"] = status
    run["agent_log_tail"] = ["starting", "Error: --dangerously-skip-permissions cannot be used "
                                         "with root/sudo privileges"]
    if status == "no_submission":
        for path in (fixture_run / "results").glob("[0-9]*.json"):
            path.unlink()
        (fixture_run / "submissions.jsonl").write_text("")
        events = [json.loads(line) for line in (fixture_run / "events.jsonl").read_text()
                  .splitlines()]
        events = [e for e in events if not e["type"].startswith("submission_")
                  and not (e["type"] == "snapshot" and e["data"].get("submission_id"))]
        (fixture_run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        run.update(submissions=0, valid_submissions=0, best_score=None, final_score=None)
    (fixture_run / "run.json").write_text(json.dumps(run))
    if status == "no_submission":
        events = [json.loads(line) for line in (fixture_run / "events.jsonl").read_text()
                  .splitlines()]
        for e in events:
            if e["type"] == "run_finished":
                e["data"].update(best_score=None, final_score=None)
        (fixture_run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    maker.reseal(fixture_run)
    report = build_report(fixture_run)
    assert report["verification"]["ok"], report["verification"]["problems"]
    assert report["run"]["status"] == status
    categories = {f["category"]: f for f in report["failures"]}
    wanted = "agent_crashed" if status == "agent_failed" else "no_submission"
    assert status in categories[wanted]["message"]
    assert any("dangerously" in e["text"] for e in categories[wanted]["evidence"])
    board = build_leaderboard(fixture_run.parent)
    assert board.n_runs == 1


def test_leaderboard_tokens_and_cost(maker, tmp_path):
    root = tmp_path / "runs"
    for seed in (0, 1):
        dr.add_to_run(maker.make_run(root / f"cc-s{seed}", seed=seed, agent="claude-code",
                                     driver="scripted:sft-recipe"), maker, "claude-code")
    maker.make_run(root / "ref-s0", seed=0, agent="ref-sft")
    board = build_leaderboard(root)
    groups = {g.key["agent"]: g for g in board.groups}
    cc, ref = groups["claude-code"], groups["ref-sft"]
    usage = [dr.usage_of(k) for k in range(6)]
    tokens = sum(sum(u.values()) for u in usage)      # all four kinds, as the gateway
    cost = sum(dr.cost_of(u) for u in usage)
    assert cc.stats["tokens"].mean == tokens and cc.stats["cost_usd"].mean == pytest.approx(cost)
    assert cc.stats["cost_per_point"].mean == pytest.approx(
        (cost / 22.0 + cost / (52.7 - 30.3)) / 2)
    assert ref.stats["tokens"].mean is None and ref.stats["cost_per_point"].mean is None
    md = render_leaderboard(board, "md")
    assert "| tokens | cost (USD) | cost per point |" in md
    assert f"| {tokens} ± 0 ({tokens}–{tokens}) | ${cost:.4f} ± $0.0000 (${cost:.4f}–" in md
    assert md.rstrip().endswith("| — | — | — |")       # ref-sft called no driver
    rows = list(csv.DictReader(io.StringIO(render_leaderboard(board, "csv"))))
    row = next(r for r in rows if r["agent"] == "claude-code")
    assert row["tokens_mean"] == str(tokens) and float(row["cost_usd_mean"]) == \
        pytest.approx(cost, rel=1e-5)
    assert next(r for r in rows if r["agent"] == "ref-sft")["cost_per_point_mean"] == ""
    html = render_leaderboard(board, "html")
    assert "<th>cost per point</th>" in html


def test_cost_per_point_blank_without_improvement(maker, tmp_path):
    run = maker.make_run(tmp_path / "runs" / "flat", n=2)   # scores 41 then a base copy
    dr.add_to_run(run, maker, "codex", stream=False)
    results = json.loads((run / "run.json").read_text())
    assert results["best_score"] is not None
    board = build_leaderboard(tmp_path / "runs")
    group = board.groups[0]
    assert group.stats["tokens"].mean > 0 and group.stats["cost_per_point"].mean is not None
    # Cost per point is blank when best <= baseline.
    from a2c.analysis.leaderboard import driver_usage
    from a2c.analysis.record import RunRecord
    assert driver_usage(RunRecord.load(run), 30.0, 30.0)["cost_per_point"] is None
    assert driver_usage(RunRecord.load(run), 29.0, 30.0)["cost_per_point"] is None


def test_level3_episodes_render_as_steps(fixture_run, maker):
    path = fixture_run / "results" / "5.json"
    result = json.loads(path.read_text())
    intro = ("You are in a maze of twisty little passages, all alike. " * 60).strip()
    for item in result["items"]:
        item["prompt"] = "Find the treasure. " + intro
        item["first_observation"] = intro
        item["trajectory"] = [{"action": f"go {d}", "observation": intro if i == 0 else
                               "A room. Exits: north, south.", "reward": 0.5 * (i == 3),
                               "output": f"I will go {d}."}
                              for i, d in enumerate(["north", "east", "south", "west"] * 10)]
        item["reward"] = 1.0 if item["correct"] else 0.0
    path.write_text(json.dumps(result))
    run = json.loads((fixture_run / "run.json").read_text())
    run["level"] = 3
    (fixture_run / "run.json").write_text(json.dumps(run))
    events = [json.loads(line) for line in (fixture_run / "events.jsonl").read_text()
              .splitlines()]
    events[0]["data"]["level"] = 3
    (fixture_run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    maker.reseal(fixture_run)
    report, paths = write_report(fixture_run, fixture_run / "out")
    example = report["outcomes"]["examples"][0]
    assert example["steps"] == 40 and len(example["trajectory"]) == 30
    assert example["trajectory"][0]["action"] == "go north"
    html = paths.html.read_text()
    assert '<ol class="episode-steps">' in html and 'class="episode"' in html
    assert "… 10 more step(s) in the results file." in html
    assert "&#34;action&#34;" not in html and '{"action"' not in html   # no raw JSON lines
    assert '<details class="long">' in html       # the long introduction is collapsed
    assert "first observation (" in html
    assert "<code class=\"text\">go north</code>" in html
    md = paths.md.read_text()
    assert "  1. `go north`" in md and '{"action"' not in md


def test_a_served_driver_is_named_by_digest_in_the_report(driven_copy, tmp_path):
    """A vllm/ driver a2c served: the report names its weights' digest, the server's version
    and flags and the sampling in force, and the calls whose cap the context lowered."""
    run_json = driven_copy / "run.json"
    run = json.loads(run_json.read_text())
    run["driver_server"] = {
        "kind": "vllm", "model": "smollm2-135m-instruct", "served_model_name": "smollm2",
        "weights": {"fingerprint": "ab" * 32}, "version": "0.32.0",
        "argv": ["serve", "/m", "--seed", "4", "--tool-call-parser", "hermes"],
        "max_model_len": 2048, "tool_call_parser": "hermes", "chat_template": None,
        "gpus": [], "sampling": {"seed": 4, "defaults": {"temperature": 0.2}},
        "context": {"trained": 1024, "needed": 2048, "needed_by": "claude-code",
                    "stretched": True, "set_by": "a2c", "why": "..."},
        "shared": {"key": "k1", "started_by": "trial-7", "started_by_this_run": False}}
    run_json.write_text(json.dumps(run))
    EventLog(driven_copy / "events.jsonl").append("driver_call", {
        "seq": 91, "wire": "openai-chat", "path": "/v1/chat/completions", "status": 200,
        "cap_lowered": {"requested": 32000, "forwarded": 1500, "context": 2048,
                        "input_estimate": 548, "why": "context"}})
    # (edited after the seal: reported with --force, marked unverified)
    report, paths = write_report(driven_copy, tmp_path / "out", force=True)
    validate_report(report)
    server = report["driver"]["server"]
    assert server["weights_fingerprint"] == "ab" * 32 and server["version"] == "0.32.0"
    assert server["sampling"] == {"seed": 4, "defaults": {"temperature": 0.2}}
    assert report["driver"]["caps_lowered"] == [
        {"seq": 91, "requested": 32000, "forwarded": 1500, "context": 2048,
         "input_estimate": 548, "why": "context"}]
    md = paths.md.read_text()
    assert f"weights `{'ab' * 32}`" in md and "vLLM 0.32.0 serving" in md
    assert "seed 4; server defaults temperature=0.2" in md
    assert "#91: 32000 → 1500 (context 2048)" in md
    # the context a2c stretched for the scaffold, and the server the node's runs shared
    assert server["stretched_from"] == 1024 and server["stretched_for"] == "claude-code"
    assert "context 2048 (stretched for claude-code from the 1024 the model was trained on" in md
    assert "shared with the other runs of its node (started by `trial-7`)" in md
    html = paths.html.read_text()
    assert f"<code>{'ab' * 32}</code>" in html and "Caps lowered for the context" in html


def test_a_driver_not_served_by_a2c_has_no_server(written):
    report, _ = written
    assert report["driver"]["server"] is None and report["driver"]["caps_lowered"] == []
