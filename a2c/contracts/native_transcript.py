"""The few shapes of a scaffold's own transcript that carry a tool's result, typed.

Every CLI writes its own format (analysis/transcripts.py walks any JSON it finds): Claude Code
stream-json `tool_result` blocks, a chat-style `role: tool` message (mini-swe-agent), a tool part
with its `state` (OpenCode; Gemini's tool_result events hold the same keys without `state`) and a
Codex `command_execution` item. `ToolObject.of` reads one JSON object into the shapes it holds,
here, so that the keys are the scaffolds' own in one place and the analysis reads attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import Record


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class ExitMeta(Record):
    """A tool output's metadata, where each scaffold states the exit code under its own key."""

    exit_code: Any = None
    exitCode: Any = None        # noqa: N815 - the scaffold's key
    exit: Any = None
    returncode: Any = None

    @property
    def code(self) -> int | None:
        """The first integer exit code it states (exit_code, exitCode, exit, returncode)."""
        return next((c for c in map(_int, (self.exit_code, self.exitCode, self.exit,
                                            self.returncode)) if c is not None), None)


def stated_exit_code(data: Any) -> int | None:
    """The exit code a JSON tool output states: in its `metadata` (Codex), else at its top."""
    if not isinstance(data, dict):
        return None
    meta = data["metadata"] if isinstance(data.get("metadata"), dict) else data
    return ExitMeta.from_dict(meta).code


@dataclass(frozen=True)
class ClaudeToolResult(Record):
    """A Claude Code `tool_result` block."""

    tool_use_id: str = ""
    content: Any = None
    is_error: Any = None


@dataclass(frozen=True)
class ToolMessage(Record):
    """A chat-style tool message (`role: tool`, mini-swe-agent): `returncode` in its `extra`."""

    ident: str = ""
    content: Any = None
    exit_code: int | None = None


@dataclass(frozen=True)
class ToolState(Record):
    """A tool part's state (OpenCode `state`; Gemini: the event itself): its output, its
    status and the exit code its metadata states (OpenCode `metadata.exit`)."""

    ident: str = ""
    output: Any = None
    exit_code: int | None = None
    failed: bool = False


@dataclass(frozen=True)
class CommandExecution(Record):
    """A Codex `command_execution` item: the command line, its exit code and output."""

    command: str = ""
    exit_code: int = 0
    output: Any = None


@dataclass(frozen=True)
class ToolObject:
    """What one JSON object of a transcript holds (each None when it is not that shape)."""

    claude: ClaudeToolResult | None = None
    message: ToolMessage | None = None
    state: ToolState | None = None
    command: CommandExecution | None = None

    @classmethod
    def of(cls, d: dict[str, Any]) -> ToolObject:
        claude = ClaudeToolResult.from_dict(d) \
            if isinstance(d.get("tool_use_id"), str) and "content" in d else None
        ident = d.get("callID") or d.get("call_id") or d.get("tool_call_id") or d.get("tool_id")
        state = d["state"] if isinstance(d.get("state"), dict) else d
        message = tool_state = command = None
        if isinstance(ident, str) and d.get("role") == "tool" and "content" in d:
            message = ToolMessage(ident, d["content"],
                                  _int(_dict(d.get("extra")).get("returncode")))
        elif isinstance(ident, str) and ("output" in state or "result" in state):
            meta = _dict(state.get("metadata"))
            code = meta.get("exit", meta.get("exit_code", state.get("exit_code")))
            tool_state = ToolState(ident, state.get("output", state.get("result")), _int(code),
                                   state.get("status") in ("error", "failed"))
        if isinstance(d.get("command"), str) and _int(d.get("exit_code")) is not None:
            command = CommandExecution(d["command"], d["exit_code"],
                                       d.get("aggregated_output") or d.get("output"))
        return cls(claude, message, tool_state, command)
