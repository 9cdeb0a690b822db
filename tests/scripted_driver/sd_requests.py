"""Per-wire requests for the scripted driver tests: a script, tool definitions and conversation
histories shaped like each provider's, and the trimmed real CLI requests (imported by name)."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
WIRES = ["anthropic", "openai-chat", "openai-responses", "gemini"]

SCRIPT = """\
apiVersion: a2c/v1
kind: DriverScript
id: test-script
usage: {input_tokens: 100, output_tokens: 10, cache_read_tokens: 1000}
side: {text: A title, usage: {input_tokens: 7, output_tokens: 2}}
turns:
  - run: echo one
    timeout: 30
    usage: {input_tokens: 11, output_tokens: 3, cache_read_tokens: 5}
  - run: cat status.txt
    until: READY
    max_repeats: 4
    usage: {input_tokens: 22, output_tokens: 4, cache_read_tokens: 0}
  - write: {path: /tmp/out.txt, content: "hello\\n"}
    text: Writing the file.
  - say: All done.
    usage: {input_tokens: 44, output_tokens: 6, cache_read_tokens: 50}
"""

SHELL_PARAMS = {"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}


def shell_tools(wire: str) -> list:
    if wire == "anthropic":
        return [{"name": "Bash", "description": "run", "input_schema": SHELL_PARAMS}]
    if wire == "openai-chat":
        return [{"type": "function", "function": {"name": "bash", "parameters": SHELL_PARAMS}}]
    if wire == "openai-responses":
        return [{"type": "function", "name": "shell", "parameters": SHELL_PARAMS}]
    return [{"functionDeclarations": [{"name": "run_shell_command",
                                       "parameters": {"type": "OBJECT", "properties": {
                                           "command": {"type": "STRING"}},
                                           "required": ["command"]}}]}]


def history(wire: str, results: list[str], tool_name: str = "t") -> list:
    """A conversation: the user's prompt, then per result one model tool call and its result."""
    if wire == "anthropic":
        out = [{"role": "user", "content": "go"}]
        for i, r in enumerate(results):
            out.append({"role": "assistant", "content": [
                {"type": "text", "text": "thinking"},
                {"type": "tool_use", "id": f"toolu_{i}", "name": tool_name, "input": {}}]})
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": r}]})
        return out
    if wire == "openai-chat":
        out = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
        for i, r in enumerate(results):
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": tool_name, "arguments": "{}"}}]})
            out.append({"role": "tool", "tool_call_id": f"c{i}", "content": r})
        return out
    if wire == "openai-responses":
        out = [{"type": "message", "role": "developer",
                "content": [{"type": "input_text", "text": "sys"}]},
               {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "go"}]}]
        for i, r in enumerate(results):
            out.append({"type": "reasoning", "id": f"rs_{i}", "summary": []})
            out.append({"type": "function_call", "call_id": f"c{i}", "name": tool_name,
                        "arguments": "{}"})
            out.append({"type": "function_call_output", "call_id": f"c{i}", "output": r})
        return out
    out = [{"role": "user", "parts": [{"text": "go"}]}]
    for r in results:
        out.append({"role": "model", "parts": [{"functionCall": {"name": tool_name,
                                                                 "args": {}}}]})
        out.append({"role": "user", "parts": [{"functionResponse": {
            "name": tool_name, "response": {"output": r}}}]})
    return out


def capture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
