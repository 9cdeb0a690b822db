"""Mapping a script turn onto the scaffold's own tools, found in the request's tool definitions.

The script says what to do (run a command, write a file, finish); each CLI names and shapes its
tools differently (Claude Code `Bash`/`Write`, Codex `shell` with an argv array or
`exec_command`, Gemini CLI `run_shell_command`/`write_file`, OpenCode `bash`/`write`,
mini-swe-agent `bash`, OpenHands `execute_bash`/`str_replace_editor`/`finish`). Tools are
recognised by name first, then by shape (a `command`/`cmd` parameter that is free text), so a
renamed or new scaffold still works. Required parameters the script says nothing about are
filled with harmless values, so the CLI's own argument validation passes.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from a2c.wires import Tool

SHELL_NAMES = ("Bash", "bash", "shell", "exec_command", "run_shell_command", "execute_bash",
               "shell_command", "terminal", "run_command", "execute_command")
WRITE_NAMES = ("Write", "write_file", "write", "create_file", "WriteFile")
FINISH_NAMES = ("finish", "submit_final_answer", "attempt_completion", "task_complete")
_COMMAND_PARAMS = ("command", "cmd")
_PATH_PARAMS = ("file_path", "filePath", "path", "absolute_path", "filename")
_CONTENT_PARAMS = ("content", "contents", "file_text", "text")
_TIMEOUT_PARAMS = ("timeout", "timeout_ms", "timeoutMs", "timeout_seconds", "timeout_sec",
                   "yield_time_ms")
# The command that ends a mini-swe-agent session (v2: COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT,
# v1: MINI_SWE_AGENT_FINAL_OUTPUT): its environment raises Submitted when the first output line
# is the sentinel. Found in the prompt, so the prompt's own wording wins.
_SENTINEL = re.compile(r"echo\s+(COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT|MINI_SWE_AGENT_FINAL_OUTPUT)")
# Text-protocol scaffolds ask for one fenced block per reply, e.g. ```mswea_bash_command or ```bash.
_FENCE = re.compile(r"```([A-Za-z0-9_]*(?:bash|sh|shell)[A-Za-z0-9_]*)[ \t]*\n")
# Where the scaffold's prompt states its working directory (Claude Code, OpenCode: "working
# directory: X"; Codex: <cwd>X</cwd>; Gemini CLI: its "Workspace Directories" list).
_CWD = (re.compile(r"working directory:\s*(/[^\s<>`'\"]+)", re.I),
        re.compile(r"<cwd>\s*(/[^<\s]+)\s*</cwd>"),
        re.compile(r"Workspace Directories:\**\s*\n\s*-\s*(/[^\s`]+)"),
        re.compile(r"working in the directory:?\s*`?(/[^\s`]+?)`?[.\s]", re.I))


@dataclass
class Call:
    """One tool call of a reply; `kind` local_shell is Codex's built-in shell item."""

    name: str
    arguments: dict
    kind: str = "function"


def _props(tool: Tool) -> dict:
    props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    return props if isinstance(props, dict) else {}


def _required(tool: Tool) -> list[str]:
    req = tool.parameters.get("required") if isinstance(tool.parameters, dict) else None
    return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


def _types(prop: Any) -> set[str]:
    if not isinstance(prop, dict):
        return set()
    kind = prop.get("type")
    out = {kind} if isinstance(kind, str) else set(kind or [])
    for alt in prop.get("anyOf") or prop.get("oneOf") or []:
        out |= _types(alt)
    return out


def _command_param(tool: Tool) -> str | None:
    props = _props(tool)
    for name in _COMMAND_PARAMS:
        prop = props.get(name)
        if isinstance(prop, dict) and not prop.get("enum") and _types(prop) & {"string", "array"}:
            return name
    return None


def find_shell(tools: list[Tool]) -> Tool | None:
    """The scaffold's shell tool: a known name with a command parameter, else any free-text
    `command`/`cmd` tool (not one whose `command` is an enum, like str_replace_editor's)."""
    for tool in tools:
        if tool.kind == "local_shell":
            return tool
    by_name = {t.name: t for t in tools if t.kind == "function"}
    for name in SHELL_NAMES:
        if name in by_name and _command_param(by_name[name]):
            return by_name[name]
    return next((t for t in tools if t.kind == "function" and _command_param(t)), None)


def find_write(tools: list[Tool]) -> Tool | None:
    by_name = {t.name: t for t in tools if t.kind == "function"}
    for name in WRITE_NAMES:
        tool = by_name.get(name)
        if tool and any(p in _props(tool) for p in _PATH_PARAMS) \
                and any(p in _props(tool) for p in _CONTENT_PARAMS):
            return tool
    editor = by_name.get("str_replace_editor")
    if editor and "create" in ((_props(editor).get("command") or {}).get("enum") or []):
        return editor
    return None


def find_finish(tools: list[Tool]) -> Tool | None:
    by_name = {t.name: t for t in tools if t.kind == "function"}
    return next((by_name[n] for n in FINISH_NAMES if n in by_name), None)


def _timeout_value(name: str, prop: dict, seconds: float) -> int | float:
    """`seconds` in the parameter's units (milliseconds when its name or description says so),
    clamped to a maximum stated in the schema or its description ('max 600000')."""
    desc = str(prop.get("description", ""))
    millis = name.endswith(("_ms", "Ms")) or re.search(r"milli ?seconds|\bms\b", desc, re.I)
    value: int | float = int(round(seconds * 1000)) if millis else (
        int(seconds) if float(seconds).is_integer() else seconds)
    maximum = prop.get("maximum")
    if maximum is None:
        found = re.search(r"max(?:imum)?\D{0,12}?(\d[\d,_]*)", desc, re.I) \
            or re.search(r"range(?: is)?\s*\d+\s*-\s*(\d+)", desc, re.I)
        maximum = int(re.sub(r"[,_]", "", found.group(1))) if found else None
    if isinstance(maximum, (int, float)) and value > maximum:
        value = maximum
    return value


def _filler(name: str, prop: Any, note: str) -> Any:
    """A harmless value for a required parameter the script does not set."""
    prop = prop if isinstance(prop, dict) else {}
    if prop.get("enum"):
        return prop["enum"][0]
    if "default" in prop:
        return prop["default"]
    kinds = _types(prop)
    if "string" in kinds or not kinds:
        return note if re.search(r"desc|summary|reason|justif|title|message", name, re.I) \
            else "scripted"
    if "boolean" in kinds:
        return False
    if kinds & {"integer", "number"}:
        return prop.get("minimum", 1)
    if "array" in kinds:
        return []
    if "object" in kinds:
        return {}
    return None


def _fill(tool: Tool, args: dict, note: str, optional: tuple[str, ...] = ()) -> dict:
    props = _props(tool)
    for name in [*_required(tool), *(o for o in optional if o in props)]:
        if name not in args:
            args[name] = _filler(name, props.get(name), note)
    return args


def describe(command: str) -> str:
    """A short description of a command, for the tools that ask for one."""
    first = " ".join(command.strip().split())
    return (first[:57] + "...") if len(first) > 60 else first


# argv for shell tools that take one: `bash -c`, not the login shell `bash -lc` Codex writes by
# habit, because a login shell runs /etc/profile, which resets PATH on Debian-like systems and
# would hide the run's Python environment (its venv is first on the PATH the agent is given).
ARGV = ("bash", "-c")


def shell_call(tool: Tool, command: str, timeout: float | None, note: str = "") -> Call:
    note = note or describe(command)
    if tool.kind == "local_shell":
        action: dict = {"type": "exec", "command": [*ARGV, command]}
        if timeout:
            action["timeout_ms"] = int(timeout * 1000)
        return Call("local_shell", action, kind="local_shell")
    param = _command_param(tool) or "command"
    props = _props(tool)
    array = "array" in _types(props.get(param)) and "string" not in _types(props.get(param))
    args: dict = {param: [*ARGV, command] if array else command}
    login = props.get("login")
    if isinstance(login, dict) and "boolean" in _types(login):
        args["login"] = False           # Codex exec_command: the same reason as ARGV
    if timeout:
        for name in _TIMEOUT_PARAMS:
            if name in props:
                args[name] = _timeout_value(name, props[name], timeout)
    return Call(tool.name, _fill(tool, args, note, optional=("description",)))


def heredoc(path: str, content: str) -> str:
    """A shell command writing `content` to `path` byte for byte (the delimiter never occurs in
    it; a missing final newline is taken off again after the here-document adds one)."""
    tag = "A2C_EOF"
    while tag in content:
        tag += "_X"
    quoted = shlex.quote(path)
    body = content if content.endswith("\n") else content + "\n"
    strip = "" if content.endswith("\n") else f" && truncate -s -1 {quoted}"
    return f"mkdir -p \"$(dirname {quoted})\" && cat > {quoted} <<'{tag}'{strip}\n{body}{tag}"


def working_dir(prompt: str) -> str | None:
    for pattern in _CWD:
        found = pattern.search(prompt)
        if found:
            return found.group(1).rstrip(".,;:")
    return None


def write_call(tool: Tool, path: str, content: str) -> Call:
    props = _props(tool)
    if tool.name == "str_replace_editor":
        return Call(tool.name, _fill(tool, {"command": "create", "path": path,
                                            "file_text": content}, f"write {path}"))
    path_param = next(p for p in _PATH_PARAMS if p in props)
    content_param = next(p for p in _CONTENT_PARAMS if p in props)
    return Call(tool.name, _fill(tool, {path_param: path, content_param: content},
                                 f"write {path}"))


def sentinel(prompt: str) -> str | None:
    found = _SENTINEL.search(prompt)
    return f"echo {found.group(1)}" if found else None


def text_fence(prompt: str) -> str | None:
    found = _FENCE.search(prompt)
    return found.group(1) if found else None
