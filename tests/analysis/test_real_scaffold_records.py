"""The real scaffolds' records kept from the end-to-end runs (tests/fixtures/agents/<id>/): the
trajectory's enrichment reads each CLI's own transcript format and finds the tool outputs the
scripted SFT recipe produced, and the gateway's driver_call events parse as the contract says.
When a CLI changes its transcript format, refreshing the fixtures
(A2C_SAVE_AGENT_FIXTURES=1 pytest --runslow tests/agents/test_scaffolds_e2e.py) makes this fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2c.analysis.transcripts import native_results
from a2c.contracts.events import DriverCall, payload_of

FIXTURES = Path(__file__).parents[1] / "fixtures" / "agents"
SCAFFOLDS = {"claude-code": "anthropic", "codex": "openai-responses", "gemini-cli": "gemini",
             "opencode": "anthropic", "mini-swe-agent": "openai-chat"}


@pytest.mark.parametrize("scaffold", sorted(SCAFFOLDS))
def test_native_transcript_yields_the_recipes_tool_outputs(scaffold):
    folder = FIXTURES / scaffold
    found = []
    for path in sorted(folder.iterdir()):
        if path.name == "driver_calls.jsonl":
            continue
        by_id, by_command = native_results(path)
        outputs = [v.content or "" for v in [*by_id.values(), *by_command.values()]]
        found += [o for o in outputs if "TRAINING_DONE" in o]
    assert found, f"{scaffold}: no transcript gave the training poll's output"


@pytest.mark.parametrize("scaffold", sorted(SCAFFOLDS))
def test_driver_calls_are_contract_events_on_the_scaffolds_wire(scaffold):
    lines = (FIXTURES / scaffold / "driver_calls.jsonl").read_text(encoding="utf-8").splitlines()
    calls = [payload_of(json.loads(line)) for line in lines]
    assert len(calls) >= 5 and all(isinstance(c, DriverCall) for c in calls)
    assert [c.seq for c in calls] == sorted(c.seq for c in calls)
    assert {c.wire for c in calls} == {SCAFFOLDS[scaffold]}
    assert all(c.status == 200 and c.driver == "scripted:sft-recipe" for c in calls)
    assert all(c.request_sha256 and c.response_sha256 for c in calls)
    assert sum(c.output_tokens for c in calls) > 0 and sum(c.cost_usd for c in calls) > 0
