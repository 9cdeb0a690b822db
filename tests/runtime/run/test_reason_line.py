"""Issue 25: a failed scaffold run's reason is one readable line, never raw stream-json."""

from __future__ import annotations

import json

from a2c.runtime.run.reason import WIDTH, reason_line


def test_stream_json_gives_the_last_thing_said():
    tail = [json.dumps({"type": "system", "subtype": "init", "tools": ["Bash"] * 50}),
            json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "text", "text": "Training is at step 15;\nI will wait."},
                {"type": "tool_use", "name": "Bash", "input": {"command": "sleep 25"}}]}}),
            json.dumps({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "content": "STILL_TRAINING"}]}}),
            '{"type": "result", "subtype": "error_max_turns", "usage": {"input_tokens": 1',  # cut
            ]
    assert reason_line(tail) == "Training is at step 15; I will wait."
    tail.append(json.dumps({"type": "result", "subtype": "success", "result": "Out of time."}))
    assert reason_line(tail) == "Out of time."
    tail.append(json.dumps({"type": "result", "subtype": "error_max_turns"}))
    assert reason_line(tail) == "the agent CLI ended: error_max_turns"


def test_plain_logs_and_codex_items():
    assert reason_line(["step 1", "Traceback (most recent call last):", "OSError: disk full"]) \
        == "OSError: disk full"
    codex = [json.dumps({"type": "item.completed", "item": {"type": "agent_message",
                                                             "text": "Submitted."}}),
             json.dumps({"type": "turn.completed", "usage": {"input_tokens": 5}})]
    assert reason_line(codex) == "Submitted."
    assert reason_line([json.dumps({"type": "error", "message": "rate limited"})]) \
        == "error: rate limited"
    assert reason_line([]) is None and reason_line(None) is None
    assert reason_line(['{"cut', '']) is None
    assert len(reason_line(["x" * 1000])) == WIDTH
