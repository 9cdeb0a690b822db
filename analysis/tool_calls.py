"""What a tool call of the driver model does, from its name and arguments alone: its kind
(shell, edit, read, search, web, plan, other), a shell tool's command line, whether that command
runs ./submit, and the shell command a text-only scaffold (mini-swe-agent) writes as a ```bash
block instead of a tool call.

Kept apart from the trajectory's replay (analysis/conversation.py) because the names are every
scaffold's own vocabulary: a new scaffold's tool is one line here.
"""

from __future__ import annotations

import re
from typing import Any

from a2c.contracts.trajectory import CallExtra
from a2c.wires import ToolCall as WireCall

BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)```", re.DOTALL)
SUBMIT = re.compile(r"(?:^|[\s;&|(])(?:\./|\S*/)?submit(?:\s|$)")

TOOL_KINDS: dict[str, tuple[str, ...]] = {
    "shell": ("bash", "shell", "run_shell_command", "exec_command", "local_shell",
              "execute_bash", "execute_command", "run_command", "terminal", "shell_command",
              "bashoutput", "killshell", "write_stdin", "container.exec"),
    "edit": ("write", "edit", "multiedit", "write_file", "replace", "apply_patch",
             "str_replace_editor", "str_replace_based_edit_tool", "notebookedit", "patch",
             "create_file", "edit_file", "file_editor"),
    "read": ("read", "read_file", "read_many_files", "view", "cat", "view_image"),
    "search": ("grep", "glob", "ls", "list", "list_directory", "search_file_content",
               "find", "codebase_search", "list_dir", "search"),
    "web": ("webfetch", "websearch", "web_fetch", "google_web_search", "web_search", "fetch"),
    "plan": ("todowrite", "todoread", "update_plan", "task", "exitplanmode", "think",
             "save_memory"),
}
KIND_OF = {name: kind for kind, names in TOOL_KINDS.items() for name in names}
SHELL_KEYS = ("command", "cmd", "script")
SHELLS = ("bash", "sh", "zsh")


def tool_kind(name: str, arguments: dict[str, Any]) -> str:
    key = (name or "").strip().lower()
    if key in KIND_OF:
        return KIND_OF[key]
    if "command" in arguments or "cmd" in arguments:
        return "shell"
    return "other"


def shell_command(name: str, arguments: dict[str, Any]) -> str | None:
    """The command line of a shell tool call (Codex's ["bash", "-lc", "..."] as its script)."""
    for key in SHELL_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[0].rsplit("/", 1)[-1] in SHELLS and \
                    value[1] in ("-lc", "-c"):
                return value[2]
            return " ".join(value)
    return None


def submits(command: str | None) -> bool:
    return bool(command) and bool(SUBMIT.search(command or ""))


def call_extra(call: WireCall, arguments: dict[str, Any], *, answered: bool) -> CallExtra:
    """The trajectory's `extra` of one tool call. An answered call (one the response made)
    keeps an empty command and says whether it submits; a call repeated from a request does
    not (as the trajectory format has always written them)."""
    kind = tool_kind(call.name or "", arguments)
    command = shell_command(call.name or "", arguments) if kind == "shell" else None
    if not answered:
        return CallExtra(kind=kind, command=command or None)
    return CallExtra(kind=kind, command=command, submits=True if submits(command) else None,
                     parsed_from="message" if call.from_message else None)


def text_actions(text: str) -> list[WireCall]:
    """The shell command a text-only scaffold wrote as a ```bash block (its first one)."""
    blocks = BASH_BLOCK.findall(text or "")
    return [WireCall("", "bash", {"command": b.strip()}, from_message=True)
            for b in blocks[:1] if b.strip()]
