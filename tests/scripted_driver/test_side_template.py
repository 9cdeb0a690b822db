"""`side.template` and `side.patterns`: a side reply computed from the request (what the shipped
narrator and reviewer scripts are made of), in every wire; script errors with their position."""

from __future__ import annotations

import pytest
from sd_client import ask, request_body
from sd_requests import WIRES

from a2c.agents.scripted_driver import ScriptedDriver, ScriptError, load, parse, shipped
from a2c.agents.scripted_driver.script import render_template as render

SCRIPT = r"""apiVersion: a2c/v1
kind: DriverScript
id: echo-facts
side:
  usage: {input_tokens: 9, output_tokens: 3}
  patterns:
    score: '^S(?P<id>\d+): score (?P<score>[0-9.]+)$'
  template: |
    {% set best = namespace(s=none) %}
    {% for s in findall('score') %}{% if best.s is none or s.score|float > best.s.score|float %}{% set best.s = s %}{% endif %}{% endfor %}
    {{ {'best': best.s.id if best.s else none, 'n': findall('score')|length}|json }}
turns: [{say: done}]
"""


def test_a_template_answers_from_the_request():
    script = parse(SCRIPT, "echo-facts.yaml")
    assert render(script.side_template, "S1: score 41.0\nS2: score 52.5\nS3: score 47.0\n",
                  script.side_patterns).strip() == '{"best": "2", "n": 3}'
    assert render(script.side_template, "nothing here", script.side_patterns).strip() == \
        '{"best": null, "n": 0}'


@pytest.mark.parametrize("wire", WIRES)
def test_the_driver_serves_the_computed_reply_in_every_wire(wire, tmp_path):
    driver = ScriptedDriver(parse(SCRIPT, "echo-facts.yaml"), log=tmp_path / "log.jsonl",
                            model="claude-sonnet-4-5")
    base = driver.start()
    try:
        body = request_body(wire, messages=_user(wire, "S7: score 12.5\nS8: score 3.0"),
                            tools=None)
        reply = ask(base, wire, body)
    finally:
        driver.stop()
    assert reply["text"].strip() == '{"best": "7", "n": 2}' and reply["calls"] == []
    assert reply["usage"][:2] == (9, 3) and driver.entries[-1]["kind"] == "side"


def _user(wire, text):
    if wire == "gemini":
        return [{"role": "user", "parts": [{"text": text}]}]
    if wire == "openai-responses":
        return [{"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": text}]}]
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("body, message", [
    ("  text: a\n  template: b\n", "side: give side.text or side.template, not both"),
    ("  template: '{% if %}'\n", "side.template: template line 1:"),
    ("  template: x\n  patterns: {bad: '(unclosed'}\n",
     "side.patterns.bad: not a valid regular expression"),
    ("  text: x\n  patterns: {p: a}\n", "'template' is a dependency of 'patterns'"),
])
def test_script_errors_name_their_place(body, message):
    text = f"apiVersion: a2c/v1\nkind: DriverScript\nid: x\nside:\n{body}turns: [{{say: d}}]\n"
    with pytest.raises(ScriptError) as exc:
        parse(text, "x.yaml")
    assert message in str(exc.value) and str(exc.value).startswith("x.yaml:")


def test_a_template_that_fails_says_so_in_its_reply():
    script = parse("apiVersion: a2c/v1\nkind: DriverScript\nid: x\nside:\n"
                   "  template: \"{{ nothing.here }}\"\nturns: [{say: d}]\n")
    from a2c.agents.scripted_driver.player import side_reply
    from a2c.wires import Conversation
    reply = side_reply(script, Conversation("anthropic", "m", [], "hi", []))
    assert reply.text.startswith("(scripted driver: the script's side.template failed: ")
    assert "nothing" in reply.text and "template line 1" in reply.text


@pytest.mark.parametrize("name", ["narrator", "reviewer"])
def test_the_shipped_analysis_scripts_load_and_decline_other_questions(name):
    script = load(shipped(name))
    assert script.id == name and script.side_template is not None
    answer = render(script.side_template, "Write a short title for this session.",
                    script.side_patterns)
    assert "nothing to" in answer and "{" not in answer


def test_a_fence_in_the_question_does_not_make_an_answering_script_play_a_turn():
    """A digest can quote an agent's README with a ```bash block; a script that only answers
    questions still answers it (a script with run turns would play them as fenced commands)."""
    from a2c.agents.scripted_driver.player import choose
    from a2c.wires import Conversation
    question = "## CODE\n    +```bash\n    +python train.py\nS1: score 4.0\n"
    answering = parse(SCRIPT, "echo-facts.yaml")
    reply = choose(answering, Conversation("openai-chat", "m", [], question, []))
    assert reply.kind == "side" and reply.text.strip() == '{"best": "1", "n": 1}'
    playing = parse(SCRIPT.replace("turns: [{say: done}]", "turns: [{run: ls}]"), "p.yaml")
    assert choose(playing, Conversation("openai-chat", "m", [], question, [])).kind == "run"
