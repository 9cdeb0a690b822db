"""The typed records the level-3 code reads its payloads through (fast, no engine): an
environment's info (`StepInfo`), the workspace's l3/env.json (`L3EnvFile`) and a DeepSearchQA
corpus line (`Document`)."""

from __future__ import annotations

import pytest

from a2c.contracts.env_info import StepInfo
from a2c.contracts.l3_env_file import L3EnvFile
from a2c.paths import project_root
from a2c.runtime.envs.deepsearchqa.documents import Document, WebResult


def test_step_info_reads_what_the_rollout_reads_and_ignores_the_kinds_own_keys():
    assert StepInfo.from_dict(None) == StepInfo()
    info = StepInfo.from_dict({"task": "find the key", "won": 1, "page_type": "item",
                               "admissible_commands": ["look", "open chest"],
                               "final_reward": 0, "max_score": 0})
    assert info.task == "find the key" and info.won is True
    assert info.admissible_commands == ("look", "open chest")
    # a final reward of 0 is a reward (the episode's score), a max score of 0 divides nothing
    assert info.final_reward == 0.0 and info.max_score is None


def test_the_workspace_env_file_gives_the_graders_env():
    path = project_root() / "generated" / "textquest" / "workspace" / "l3" / "env.json"
    file = L3EnvFile.read(path)
    assert file.env.kind == "textworld" and file.env.max_steps > 0
    assert file.env.history["max_tokens"] and file.score_by == "success"
    assert file.inference["max_new_tokens"] > 0
    # a key left null takes the spec's default, as an absent one does
    bare = L3EnvFile.from_dict({"kind": "webshop", "history": None, "options": None})
    assert bare.env.history == {} and bare.env.options == {} and bare.score_by == "success"


def test_a_corpus_line_is_a_document():
    doc = Document.from_line({"id": 7, "text": "t", "title": None}, "c.jsonl:1")
    assert doc == Document(id="7", text="t")
    assert doc.to_line() == {"id": "7", "url": "", "title": "", "text": "t"}
    assert Document(id="d", text="s", snippet=True).to_line()["snippet"] is True
    with pytest.raises(ValueError, match="c.jsonl:2"):
        Document.from_line({"id": "x"}, "c.jsonl:2")
    results = WebResult.from_reply({"results": [{"url": "http://a", "title": "A", "content": "c"},
                                                {"title": "no url"}, "junk"]})
    assert results == [WebResult(url="http://a", title="A", content="c")]
    assert results[0].as_document() == Document(id="http://a", text="c", title="A",
                                                 url="http://a")
