"""trajectory.json from the driver gateway's record: every wire, streamed and not; the repeated
conversation prefix counted once; totals equal to the events; tolerant of damaged records;
enriched from the native transcript."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from a2c.analysis.tool_calls import shell_command, tool_kind
from a2c.analysis.trajectory import build_trajectory, trajectory_of, write_trajectory
from a2c.contracts.events import EventLog, read_events
from a2c.contracts.trajectory import TRAJECTORY_FORMAT, Trajectory, validate_trajectory
from a2c.wires.reading import response_turn
from a2c.wires.sse import events as sse_events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "trajectory"))
import driver_record as dr  # noqa: E402

SCAFFOLDS = ["claude-code", "opencode", "codex", "gemini-cli", "mini-swe-agent", "chat-tools",
             "text-actions"]
COMMANDS = ["ls -la", "python train.py", "./submit output/m1",
            "python train.py --epochs 3 && ./submit output/m2"]


def _agent(t):
    return [s for s in t["steps"] if s["source"] == "agent"]


def _commands(t):
    return [c["extra"]["command"] for s in t["steps"] for c in s.get("tool_calls") or []
            if "command" in (c.get("extra") or {})]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("scaffold", SCAFFOLDS)
def test_each_wire_builds_a_valid_trajectory(tmp_path, scaffold, stream):
    run = dr.write_record(tmp_path / "run", scaffold, stream=stream)
    t = build_trajectory(run)
    assert validate_trajectory(t) == []
    assert t["format"] == TRAJECTORY_FORMAT and t["schema_version"].startswith("ATIF-v1.")
    assert t["extra"]["warnings"] == [] and t["extra"]["wires"] == [dr.WIRE[scaffold]]
    agent = _agent(t)
    assert len(agent) == len(dr.SCENARIO)          # one agent step per driver call
    assert [s["extra"]["call_seq"] for s in agent] == list(range(len(dr.SCENARIO)))
    text = [s["message"] for s in agent]
    if scaffold == "text-actions":
        assert all(m.startswith("THOUGHT: ") for m in text)
    else:
        assert text == [step["text"] for step in dr.SCENARIO]
    commands = _commands(t)
    expected = COMMANDS if scaffold not in ("codex", "mini-swe-agent", "text-actions") else \
        [COMMANDS[0], "cat > train.py <<'EOF'\nprint('training')\nEOF", *COMMANDS[1:]]
    if scaffold in ("mini-swe-agent", "text-actions"):
        expected = expected + ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]
    assert commands == expected
    # Each tool's output is the observation of the call that asked for it.
    first = agent[0]
    call = first["tool_calls"][0]
    result = first["observation"]["results"][0]
    assert result["source_call_id"] == call["tool_call_id"]
    assert "INSTRUCTIONS.md" in result["content"] and "status" in result["content"]
    assert all(len(s.get("observation", {}).get("results", [])) == len(s.get("tool_calls") or [])
               for s in agent[:-1])
    submits = [c for s in agent for c in s.get("tool_calls") or [] if c["extra"].get("submits")]
    assert len(submits) == 2
    assert t["agent"]["model_name"] == dr.MODEL[dr.WIRE[scaffold]]
    assert all(s["model_name"] == dr.MODEL[dr.WIRE[scaffold]] for s in agent)


@pytest.mark.parametrize("scaffold", SCAFFOLDS)
def test_totals_equal_the_sum_of_the_events(tmp_path, scaffold):
    run = dr.write_record(tmp_path / "run", scaffold, stream=True, side=scaffold == "opencode")
    t = build_trajectory(run)
    calls = [e["data"] for e in read_events(run / "events.jsonl") if e["type"] == "driver_call"]
    final = t["final_metrics"]
    assert final["total_prompt_tokens"] == sum(c["input_tokens"] + c["cache_read_tokens"]
                                               + c["cache_write_tokens"] for c in calls)
    assert final["extra"]["input_tokens"] == sum(c["input_tokens"] for c in calls)
    assert final["extra"]["tokens"] == sum(c["input_tokens"] + c["output_tokens"]
                                           + c["cache_read_tokens"] + c["cache_write_tokens"]
                                           for c in calls)
    assert final["total_completion_tokens"] == sum(c["output_tokens"] for c in calls)
    assert final["total_cached_tokens"] == sum(c["cache_read_tokens"] for c in calls)
    assert final["total_cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls))
    assert final["extra"]["calls"] == len(calls)
    assert final["extra"]["cache_write_tokens"] == sum(c["cache_write_tokens"] for c in calls)
    assert final["total_steps"] == len(t["steps"])
    per_step = [s["metrics"] for s in t["steps"] if "metrics" in s]
    assert sum(m["prompt_tokens"] for m in per_step) == final["total_prompt_tokens"]
    assert sum(m["cost_usd"] for m in per_step) == pytest.approx(final["total_cost_usd"])


@pytest.mark.parametrize("scaffold", SCAFFOLDS)
def test_repeated_prefix_counted_once(tmp_path, scaffold):
    run = dr.write_record(tmp_path / "run", scaffold, stream=False)
    t = build_trajectory(run)
    seen = [(s["source"], s["message"]) for s in t["steps"] if s["source"] != "agent"]
    assert len(seen) == len(set(seen))              # no system / user message twice
    assert not any((s.get("extra") or {}).get("from_request") for s in t["steps"])
    ids = [c["tool_call_id"] for s in t["steps"] for c in s.get("tool_calls") or []]
    assert len(ids) == len(set(ids))
    results = [r["source_call_id"] for s in t["steps"]
               for r in (s.get("observation") or {}).get("results", [])]
    assert len(results) == len(set(results)) == len(dr.SCENARIO) - 1
    # The first request's system prompt and first user message open the trajectory.
    assert [s["source"] for s in t["steps"][:1]] in (["system"], ["user"])


def test_side_calls_make_their_own_thread(tmp_path):
    run = dr.write_record(tmp_path / "run", "opencode", stream=True, side=True)
    t = build_trajectory(run)
    threads = t["final_metrics"]["extra"]["threads"]
    assert [th["calls"] for th in threads] == [6, 1]
    title = [s for s in t["steps"] if (s.get("extra") or {}).get("thread") == 1]
    assert [s["source"] for s in title] == ["system", "user", "agent"]
    assert title[-1]["message"] == "Greeting"
    main = [s for s in _agent(t) if s["extra"]["thread"] == 0]
    assert len(main) == len(dr.SCENARIO)
    assert _commands(t) == COMMANDS


def test_write_trajectory(tmp_path):
    run = dr.write_record(tmp_path / "run", "claude-code", exhausted=True)
    path = write_trajectory(run)
    assert path == run / "trajectory.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert validate_trajectory(data) == []
    assert data == json.loads(json.dumps(build_trajectory(run)))
    system = [s for s in data["steps"] if s["source"] == "system" and "budget" in s["message"]]
    assert system and system[0]["extra"]["event"] == "driver_budget_exhausted"
    assert data["final_metrics"]["extra"]["budget_exhausted"][0]["limit"] == "cost_usd"


def test_damaged_records_never_crash(tmp_path):
    run = dr.write_record(tmp_path / "run", "chat-tools", stream=True)
    events = [e for e in read_events(run / "events.jsonl") if e["type"] == "driver_call"]
    blobs = run / "driver" / "blobs"
    (blobs / events[1]["data"]["request_sha256"]).unlink()             # a missing request
    (blobs / events[2]["data"]["response_sha256"]).write_bytes(b"\x00garbage")  # unreadable
    log = EventLog(run / "events.jsonl")
    log.append("driver_call", {"seq": 99, "wire": "martian", "path": "/v9/think",
                               "request_sha256": "0" * 64, "status": 200})
    log.append("driver_call", {"seq": 100, "wire": "anthropic", "path": "/v1/messages",
                               "request_sha256": None, "status": 529,
                               "error": "upstream overloaded", "input_tokens": "many"})
    (run / "logs").mkdir()
    (run / "logs" / "transcript.jsonl").write_text("not json\n{\"tool_use_id\": 5}\n[1, 2]\n")
    t = build_trajectory(run)
    assert validate_trajectory(t) == []
    warnings = " ".join(t["extra"]["warnings"])
    assert "driver call 1" in warnings and "missing" in warnings
    assert "driver call 2" in warnings
    failed = _agent(t)[-1]
    assert failed["extra"]["error"] == "upstream overloaded" and failed["extra"]["status"] == 529
    assert failed["message"] == "" and failed["metrics"]["prompt_tokens"] == 0
    # The unknown wire is not a generation; the unreadable answer of call 2 is an empty step,
    # and its turn comes back from the next request's history (marked as read from there).
    recovered = [s for s in _agent(t) if (s.get("extra") or {}).get("from_request")]
    assert [c["tool_call_id"] for s in recovered for c in s["tool_calls"]] == ["call_02"]
    assert len(_agent(t)) == len(dr.SCENARIO) + 2


def test_count_tokens_calls_count_in_totals_not_steps(tmp_path):
    run = dr.write_record(tmp_path / "run", "claude-code", stream=False)
    log = EventLog(run / "events.jsonl")
    log.append("driver_call", {"seq": 6, "wire": "anthropic", "path": "/v1/messages/count_tokens",
                               "status": 200, "input_tokens": 7, "cost_usd": 0.0,
                               "request_sha256": dr.blob(run, b'{"messages": []}')})
    t = build_trajectory(run)
    assert len(_agent(t)) == len(dr.SCENARIO)
    assert t["final_metrics"]["extra"]["calls"] == len(dr.SCENARIO)       # as the gateway counts
    assert t["final_metrics"]["extra"]["recorded"] == len(dr.SCENARIO) + 1
    assert t["final_metrics"]["total_prompt_tokens"] == sum(
        sum(v for k, v in dr.usage_of(i).items() if k != "output_tokens")
        for i in range(len(dr.SCENARIO))) + 7


def test_enriched_from_the_native_transcript(tmp_path):
    run = dr.write_record(tmp_path / "run", "claude-code", stream=True)
    (run / "logs").mkdir()
    full = "INSTRUCTIONS.md\nsubmit\nstatus\n" + "line\n" * 50
    lines = [
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_00", "content": full,
             "is_error": False}]}},
        {"type": "item.completed", "item": {"type": "command_execution",
                                            "command": "python train.py", "exit_code": 3,
                                            "aggregated_output": "Traceback"}},
    ]
    (run / "logs" / "transcript.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = build_trajectory(run)
    assert "transcript:logs/transcript.jsonl" in t["extra"]["sources"]
    agent = _agent(t)
    first = agent[0]["observation"]["results"][0]
    assert first["content"] == full and first["extra"]["source"] == "transcript"
    train = agent[2]["observation"]["results"][0]
    assert train["extra"]["exit_code"] == 3


@pytest.mark.parametrize("scaffold", ["text-actions", "mini-swe-agent"])
def test_exit_codes_read_from_outputs(tmp_path, scaffold):
    run = dr.write_record(tmp_path / "run", scaffold, stream=False)
    t = build_trajectory(run)
    codes = [r["extra"]["exit_code"] for s in _agent(t)
             for r in (s.get("observation") or {}).get("results", [])]
    assert codes == [0] * (len(dr.SCENARIO) - 1)


def test_tool_kinds_and_shell_commands():
    assert tool_kind("Bash", {}) == "shell" and tool_kind("run_shell_command", {}) == "shell"
    assert tool_kind("Write", {}) == "edit" and tool_kind("apply_patch", {}) == "edit"
    assert tool_kind("read_file", {}) == "read" and tool_kind("Grep", {}) == "search"
    assert tool_kind("mystery", {"cmd": "ls"}) == "shell" and tool_kind("mystery", {}) == "other"
    assert shell_command("shell", {"command": ["bash", "-lc", "ls -la"]}) == "ls -la"
    assert shell_command("exec_command", {"cmd": "pwd"}) == "pwd"
    assert shell_command("local_shell", {"command": ["ls", "-l"]}) == "ls -l"


def test_sse_and_unknown_shapes():
    assert sse_events(b"event: a\ndata: {\"x\": 1}\n\ndata: [DONE]\n\n") == [("a", {"x": 1}),
                                                                           (None, "[DONE]")]
    for wire in ("anthropic", "openai-chat", "openai-responses", "gemini", None):
        for raw in (b"", b"{}", b"[]", b"data: {}\n\n", b"\xff\xfe", b'{"choices": [null]}',
                    b'{"content": "x", "output": 5, "candidates": [{"content": 3}]}'):
            turn = response_turn(wire, raw)
            assert set(vars(turn)) >= {"text", "tool_calls", "usage"}


def test_gemini_calls_take_the_ids_the_cli_gives_them(tmp_path):
    run = dr.write_record(tmp_path / "run", "gemini-cli", stream=True)
    t = build_trajectory(run)
    ids = [c["tool_call_id"] for s in _agent(t) for c in s.get("tool_calls") or []]
    assert ids == [f"{'write_file' if k == 1 else 'run_shell_command'}_{1796133161555 + k}_0"
                   for k in range(len(dr.SCENARIO) - 1)]


@pytest.mark.parametrize("scaffold", sorted(dr.REAL_PAIRS))
def test_real_cli_requests(tmp_path, scaffold):
    """Two requests a real CLI sent (the second repeating the first, with the tool's output):
    one tool-call step whose observation is that output, then the final answer; the CLI's
    real stdout transcript read alongside."""
    run = dr.write_real_pair(tmp_path / "run", scaffold)
    t = build_trajectory(run)
    assert validate_trajectory(t) == [] and t["extra"]["warnings"] == []
    agent = _agent(t)
    assert [s["message"] for s in agent] == ["", "All done."]
    assert not any((s.get("extra") or {}).get("from_request") for s in t["steps"])
    call = agent[0]["tool_calls"][0]
    assert call["extra"] == {"kind": "shell", "command": "echo hi > hi.txt && cat hi.txt"}
    result = agent[0]["observation"]["results"][0]
    assert result["source_call_id"] == call["tool_call_id"] and "hi" in result["content"]
    users = [s for s in t["steps"] if s["source"] == "user"]
    assert sum("write hi" in s["message"] for s in users) == 1
    if scaffold in ("codex", "opencode"):     # exit codes: Codex's output / OpenCode's events
        assert result["extra"]["exit_code"] == 0
    if scaffold == "opencode":
        assert "transcript:logs/transcript.jsonl" in t["extra"]["sources"]


def test_maybe_write_trajectory(tmp_path, pristine_run):
    from a2c.analysis.trajectory import maybe_write_trajectory

    assert maybe_write_trajectory(pristine_run) is None            # a scripted agent's run
    assert not (pristine_run / "trajectory.json").exists()
    run = dr.write_record(tmp_path / "run", "codex")
    assert maybe_write_trajectory(run) == run / "trajectory.json"
    assert maybe_write_trajectory(tmp_path / "nowhere") is None


def test_transcript_folder(tmp_path):
    run = dr.write_record(tmp_path / "run", "opencode", stream=True)
    folder = run / "logs" / "transcript.d" / "session"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text(json.dumps(
        {"type": "tool_use", "part": {"callID": "toolu_02", "state": {
            "status": "completed", "output": "training\nsaved output/m1\nmore", "metadata": {
                "exit": 0}}}}) + "\n")
    t = build_trajectory(run)
    result = _agent(t)[2]["observation"]["results"][0]
    assert result["content"].endswith("more") and result["extra"]["exit_code"] == 0


def test_a_rewritten_opening_continues_its_thread(tmp_path):
    """Codex rewrites its environment message mid-session: the request still continues the
    conversation (most of its items were seen), so nothing is repeated."""
    run = tmp_path / "run"
    conversation = dr.calls("codex", stream=True)
    path, request, reply, usage = conversation[3]
    changed = json.loads(json.dumps(request))
    env = next(i for i in changed["input"] if "environment_context" in json.dumps(i))
    env["content"][0]["text"] = env["content"][0]["text"].replace("Etc/UTC", "Europe/Paris")
    conversation[3] = (path, changed, reply, usage)
    run.mkdir(parents=True)
    log = EventLog(run / "events.jsonl")
    for seq, (path, body, reply, _usage) in enumerate(conversation):
        log.append("driver_call", {"seq": seq, "wire": "openai-responses", "path": path,
                                   "status": 200, "stream": True,
                                   "request_sha256": dr.blob(run, json.dumps(body).encode()),
                                   "response_sha256": dr.blob(run, reply)})
    t = build_trajectory(run)
    assert len(t["final_metrics"]["extra"]["threads"]) == 1
    results = [r["source_call_id"] for s in t["steps"]
               for r in (s.get("observation") or {}).get("results", [])]
    assert len(results) == len(set(results)) == len(dr.SCENARIO) - 1
    users = [s["message"] for s in t["steps"] if s["source"] == "user"]
    assert sum("Europe/Paris" in m for m in users) == 1     # the new message, once


def test_a_real_runtime_record(tmp_path):
    """A record the real runtime wrote (tests/runtime/run/test_driver_e2e.py: a shell scaffold
    in bubblewrap calling the gateway twice with its key and once with a wrong one): the
    trajectory's totals are the gateway's own (run.json driver_usage)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(Path(dr.HERE) / "records" / "probe-cli", run)
    t = build_trajectory(run)
    assert validate_trajectory(t) == [] and t["extra"]["warnings"] == []
    usage = json.loads((run / "run.json").read_text())["driver_usage"]
    final = t["final_metrics"]
    assert final["extra"]["tokens"] == usage["tokens"]
    assert final["extra"]["input_tokens"] == usage["input_tokens"]
    assert final["total_completion_tokens"] == usage["output_tokens"]
    assert final["total_cost_usd"] == pytest.approx(usage["cost_usd"])
    agent = _agent(t)
    assert [s["message"] for s in agent] == ["hello from the fake upstream", "",
                                             "hello from the fake upstream"]
    assert agent[1]["extra"]["status"] == 401 and agent[1]["extra"]["error"] == "auth"
    assert final["extra"]["errors"] == usage["errors"] == 1
    assert final["extra"]["calls"] == usage["calls"] and final["extra"]["refused"] == \
        usage["refused"]


@pytest.mark.parametrize("scaffold", ["claude-code", "codex", "mini-swe-agent"])
def test_the_typed_trajectory_reads_back_as_written(tmp_path, scaffold):
    """trajectory.json read back (Trajectory.from_dict) is the record that was built: every part
    and every level's `extra` typed, so a reader uses attributes."""
    run = dr.write_record(tmp_path / "run", scaffold, side=True, long_output=True, exhausted=True)
    built = trajectory_of(run)
    path = write_trajectory(run)
    read = Trajectory.from_dict(json.loads(path.read_text()))
    assert read == built
    assert read.to_dict() == build_trajectory(run)
    agent = [s for s in read.steps if s.source == "agent"]
    assert [s.details.call_seq for s in agent] == list(range(len(agent)))
    assert all(s.metrics and s.metrics.extra and s.metrics.prompt_tokens is not None
               for s in agent)
    assert read.final_metrics and read.final_metrics.extra
    assert read.final_metrics.extra.budget_exhausted[0].limit == "cost_usd"
    assert any(c.extra and c.extra.command for s in agent for c in s.calls)
