"""Each scaffold's own tools, from the requests the real CLIs sent (fixtures/, captured by H3b
with Claude Code 2.1.332, Codex 0.171.0, Gemini CLI 0.61.0, OpenCode 1.18.33, mini-swe-agent
2.4.6) and, where no capture exists, from the tools' sources (older Codex `shell`, Codex
`local_shell`, OpenHands, mini-swe-agent's text mode)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from sd_client import ask, post
from sd_requests import capture

from a2c.agents.scripted_driver import ScriptedDriver, parse
from a2c.agents.scripted_driver.server import route

HEAD = "apiVersion: a2c/v1\nkind: DriverScript\nid: one\nturns:\n"
RUN = HEAD + "  - run: python train.py --steps 25\n    timeout: 900\n"
RUN_SHORT = HEAD + "  - run: ls -la\n    timeout: 20\n"
WRITE = HEAD + "  - write: {path: sub/train_sft.py, content: \"print('hi')\\n\"}\n"
SAY = HEAD + "  - say: Finished; the model scored.\n"


def _serve(text: str):
    return ScriptedDriver(parse(text, "one.yaml"), model="m")


def _reply(name: str, script: str, stream: bool | None = None) -> dict:
    """The scripted reply to the captured request `name`, folded to {text, calls, ...}."""
    cap = capture(name)
    wire, action, model = route(cap["path"].split("?")[0])
    body = dict(cap["body"])
    if wire != "gemini" and stream is not None:
        body["stream"] = stream
    streaming = action == "stream" if wire == "gemini" else bool(body.get("stream"))
    with _serve(script) as driver:
        base = f"http://127.0.0.1:{driver.port}"
        if wire == "gemini":
            return ask(base, wire, body, stream=streaming, model=model)
        return ask(base, wire, body, stream=streaming)


# ------------------------------------------------------------------------------ Claude Code
def test_claude_code_bash_timeout_in_ms_clamped_and_description_filled():
    reply = _reply("claude-code-1", RUN)              # streamed, as the CLI asked
    (name, args), = reply["calls"]
    assert name == "Bash"
    assert args["command"] == "python train.py --steps 25"
    assert args["timeout"] == 600000                  # 900 s, clamped to "(max 600000 ...)"
    assert args["description"] and "\n" not in args["description"]
    assert _reply("claude-code-1", RUN_SHORT, stream=False)["calls"][0][1]["timeout"] == 20000


def test_claude_code_write_uses_write_with_an_absolute_path():
    (name, args), = _reply("claude-code-1", WRITE)["calls"]
    assert name == "Write"
    assert args == {"file_path": "/tmp/h3b/ws-cc/sub/train_sft.py", "content": "print('hi')\n"}


def test_claude_code_after_a_tool_result_is_turn_two():
    script = HEAD + "  - run: echo hi\n  - say: second turn\n"
    reply = _reply("claude-code-tool-2", script)
    assert reply["calls"] == [] and reply["text"] == "second turn"
    assert reply["stop"] == "end_turn"


# ------------------------------------------------------------------------------------ Codex
def test_codex_exec_command_with_yield_time_in_range():
    reply = _reply("codex-1", RUN)
    (name, args), = reply["calls"]
    assert name == "exec_command"
    # not a login shell: /etc/profile would reset PATH and hide the run's venv
    assert args == {"cmd": "python train.py --steps 25", "yield_time_ms": 30000, "login": False}


def test_codex_write_is_a_heredoc_through_exec_command(tmp_path):
    content = "line one\nEOF\n  'quoted' $HOME `tick`\nno newline at the end"
    script = HEAD + f"  - write: {{path: sub/x.txt, content: {json.dumps(content)}}}\n"
    (name, args), = _reply("codex-1", script)["calls"]
    assert name == "exec_command"
    subprocess.run(["bash", "-c", args["cmd"]], cwd=tmp_path, check=True)
    assert (tmp_path / "sub" / "x.txt").read_text() == content


def test_codex_after_a_tool_result_is_turn_two():
    reply = _reply("codex-tool-2", HEAD + "  - run: echo hi\n  - say: second turn\n")
    assert reply["calls"] == [] and reply["text"] == "second turn"


def test_older_codex_shell_tool_takes_an_argv_array():
    tools = [{"type": "function", "name": "shell", "parameters": {
        "type": "object", "properties": {
            "command": {"type": "array", "items": {"type": "string"}},
            "workdir": {"type": "string"}, "timeout_ms": {"type": "number"}},
        "required": ["command"]}}]
    with _serve(RUN_SHORT) as driver:
        reply = ask(f"http://127.0.0.1:{driver.port}", "openai-responses",
                    {"model": "gpt-5-codex", "input": "go", "tools": tools})
    assert reply["calls"] == [("shell", {"command": ["bash", "-c", "ls -la"],
                                         "timeout_ms": 20000})]


def test_codex_local_shell_tool_gets_a_local_shell_call_item():
    with _serve(RUN_SHORT) as driver:
        reply = ask(f"http://127.0.0.1:{driver.port}", "openai-responses",
                    {"model": "codex-mini", "input": "go", "tools": [{"type": "local_shell"}],
                     "stream": True}, stream=True)
    assert reply["calls"] == [("local_shell", {"type": "exec",
                                               "command": ["bash", "-c", "ls -la"],
                                               "timeout_ms": 20000})]


# ------------------------------------------------------------------------------- Gemini CLI
def test_gemini_cli_run_shell_command_and_write_file():
    (name, args), = _reply("gemini-cli-1", RUN)["calls"]     # :streamGenerateContent?alt=sse
    assert name == "run_shell_command"
    assert args["command"] == "python train.py --steps 25" and args["description"]
    assert "timeout" not in args                               # it has no timeout parameter
    (name, args), = _reply("gemini-cli-1", WRITE)["calls"]
    assert (name, args) == ("write_file", {"file_path": "/tmp/h3b/ws-gm/sub/train_sft.py",
                                           "content": "print('hi')\n"})


def test_gemini_cli_after_a_function_response_is_turn_two():
    reply = _reply("gemini-cli-tool-2", HEAD + "  - run: echo hi\n  - say: second turn\n")
    assert reply["calls"] == [] and reply["text"] == "second turn"


# --------------------------------------------------------------------------------- OpenCode
def test_opencode_bash_and_write():
    (name, args), = _reply("opencode-2", RUN_SHORT)["calls"]
    assert (name, args) == ("bash", {"command": "ls -la", "timeout": 20000})
    (name, args), = _reply("opencode-2", WRITE)["calls"]
    assert (name, args) == ("write", {"filePath": "/tmp/h3b/ws-oc/sub/train_sft.py",
                                      "content": "print('hi')\n"})


def test_opencode_title_request_is_a_side_reply():
    reply = _reply("opencode-1", RUN)
    assert reply["calls"] == [] and reply["text"] == "Scripted session"
    assert reply["usage"] == (0, 0, 0)


def test_opencode_after_a_tool_result_is_turn_two():
    reply = _reply("opencode-tool-3", HEAD + "  - run: echo hi\n  - say: second turn\n")
    assert reply["text"] == "second turn"


# ---------------------------------------------------------------------------- mini-swe-agent
def test_mini_swe_agent_bash_tool_and_its_submit_sentinel():
    (name, args), = _reply("mini-swe-agent-1", RUN)["calls"]
    assert (name, args) == ("bash", {"command": "python train.py --steps 25"})
    reply = _reply("mini-swe-agent-1", SAY)
    # mini only ends on a bash call whose output starts with the sentinel; the text rides along
    assert reply["calls"] == [("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})]
    assert reply["text"] == "Finished; the model scored."


MINI_TEXT_SYSTEM = """You are a helpful assistant that can interact with a computer.

Your response must contain exactly ONE bash code block with ONE command (or commands connected
with && or ||).

<format_example>
Your reasoning and analysis here.

```mswea_bash_command
your_command_here
```
</format_example>
"""
MINI_TEXT_USER = ("Please solve this issue: train.\n6. Submit your changes and finish your work "
                  "by issuing the following command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.")
MINI_ACTION_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"     # litellm_textbased_model.py


@pytest.mark.parametrize("script,command", [
    (RUN_SHORT, "ls -la"), (SAY, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")])
def test_mini_swe_agent_text_mode_gets_exactly_one_fenced_block(script, command):
    body = {"model": "m", "messages": [{"role": "system", "content": MINI_TEXT_SYSTEM},
                                       {"role": "user", "content": MINI_TEXT_USER}]}
    with _serve(script) as driver:
        reply = ask(f"http://127.0.0.1:{driver.port}", "openai-chat", body)
        assert driver.entries[-1]["via"] == "text"
    assert re.findall(MINI_ACTION_REGEX, reply["text"], re.DOTALL) == [command]
    assert reply["calls"] == []


# -------------------------------------------------------------------------------- OpenHands
OPENHANDS_TOOLS = [
    {"type": "function", "function": {"name": "execute_bash", "parameters": {
        "type": "object", "properties": {
            "command": {"type": "string"}, "is_input": {"type": "string", "enum": ["true", "false"]},
            "timeout": {"type": "number", "description": "Optional. Sets a hard timeout in seconds"},
            "security_risk": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]}},
        "required": ["command", "security_risk"]}}},
    {"type": "function", "function": {"name": "str_replace_editor", "parameters": {
        "type": "object", "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
            "path": {"type": "string"}, "file_text": {"type": "string"},
            "security_risk": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]}},
        "required": ["command", "path", "security_risk"]}}},
    {"type": "function", "function": {"name": "finish", "parameters": {
        "type": "object", "properties": {"message": {"type": "string"}},
        "required": ["message"]}}}]


def _openhands(script: str) -> dict:
    body = {"model": "m", "tools": OPENHANDS_TOOLS, "messages": [
        {"role": "system", "content": "You are OpenHands agent.\n<cwd>/workspace</cwd>"},
        {"role": "user", "content": "train"}]}
    with _serve(script) as driver:
        return ask(f"http://127.0.0.1:{driver.port}", "openai-chat", body)


def test_openhands_execute_bash_not_the_editor_whose_command_is_an_enum():
    (name, args), = _openhands(RUN_SHORT)["calls"]
    assert (name, args) == ("execute_bash", {"command": "ls -la", "timeout": 20,
                                             "security_risk": "LOW"})


def test_openhands_write_and_finish():
    (name, args), = _openhands(WRITE)["calls"]
    assert (name, args) == ("str_replace_editor", {"command": "create",
                                                   "path": "/workspace/sub/train_sft.py",
                                                   "file_text": "print('hi')\n",
                                                   "security_risk": "LOW"})
    (name, args), = _openhands(SAY)["calls"]
    assert (name, args) == ("finish", {"message": "Finished; the model scored."})


def test_a_shell_tool_found_by_shape_when_its_name_is_new():
    tools = [{"name": "Read", "input_schema": {"type": "object", "properties": {
                 "file_path": {"type": "string"}}}},
             {"name": "RunInTerminal", "input_schema": {"type": "object", "properties": {
                 "cmd": {"type": "string"}, "why": {"type": "string"}},
                 "required": ["cmd", "why"]}}]
    with _serve(RUN_SHORT) as driver:
        status, _, raw = post(f"http://127.0.0.1:{driver.port}", "/v1/messages",
                              {"model": "m", "messages": [{"role": "user", "content": "x"}],
                               "tools": tools})
    block = json.loads(raw)["content"][0]
    assert block["name"] == "RunInTerminal"
    assert block["input"] == {"cmd": "ls -la", "why": "scripted"}
