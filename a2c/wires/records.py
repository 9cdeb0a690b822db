"""The typed records a wire's bodies are read into, the same whatever the wire: a request as a
list of conversation `Item`s (the analysis), or as a `Conversation` (the scripted driver's view:
model turns played, what came back after each, tools offered); a response as one `Turn`; and
the one record a wire writes from: the scripted driver's `Answer`.

Every reader is tolerant: a shape it does not know yields what it could read, never an
exception (a record is read back long after the run; a scaffold's request is never refused for
an unexpected field).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from a2c.wires.usage import Usage


@dataclass
class ToolCall:
    """A tool call the model made. `synth`: the wire gave it no id (Gemini); `from_message`:
    read out of the text of a text-protocol scaffold's answer (by the analysis), not a call;
    `kind`: function, or local_shell (Codex's built-in shell item, on the Responses wire)."""

    id: str
    name: str
    arguments: dict[str, Any]
    synth: bool = False
    from_message: bool = False
    kind: str = "function"


@dataclass
class Item:
    """One entry of a request's conversation. `kind` is system | user | assistant | tool_result;
    system and user items carry `text`, assistant items `text`, `reasoning` and `tool_calls`,
    tool results `call_id` (None where the wire names only the tool), `name`, `content` and
    `is_error`."""

    kind: str
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None
    content: str = ""
    is_error: bool = False

    @classmethod
    def assistant(cls, turn: Turn) -> Item:
        return cls("assistant", turn.text, turn.reasoning, list(turn.tool_calls))

    @classmethod
    def tool_result(cls, call_id: Any, name: Any, content: str, is_error: bool = False) -> Item:
        return cls("tool_result", call_id=call_id, name=name, content=content,
                   is_error=is_error)


@dataclass
class Turn:
    """One model answer: its text, reasoning, tool calls, the model it names, its usage and its
    stop reason (in the wire's own words)."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    stop: str | None = None


@dataclass
class Tool:
    """A tool the scaffold offers. `kind` is function, local_shell (Codex's built-in) or custom."""

    name: str
    parameters: dict = field(default_factory=dict)
    description: str = ""
    kind: str = "function"


@dataclass
class Conversation:
    """A request as the scripted driver plays it. A "model turn" is a run of consecutive
    model-authored entries: a reply of reasoning text plus a tool call counts once, however the
    scaffold splits it when it sends the history back."""

    wire: str
    model: str
    tools: list[Tool]
    prompt: str                     # system text plus the first user message (format detection)
    results: list[str]              # per model turn in the history: the text that came after it
    stream: bool = False
    include_usage: bool = False
    json_reply: bool = False        # the request asks for a JSON answer (Gemini's response schema)


@dataclass(frozen=True)
class Answer:
    """What the scripted driver says to one request, before a wire writes it (`Wire.answer`,
    `Wire.answer_stream`): its text, tool calls and usage, the model it names, and the `seed`
    its ids are made from (the same request gets the same ids)."""

    text: str
    calls: list[ToolCall]
    usage: Usage
    model: str
    seed: str

    def id(self, salt: str = "", n: int = 24) -> str:
        """A stable id of `n` hex digits for this answer (`salt` tells its parts apart)."""
        return hashlib.sha256((self.seed + salt).encode()).hexdigest()[:n]


def pieces(text: str, n: int = 3) -> list[str]:
    """Split into up to n non-empty pieces, so streamed deltas really have to be joined."""
    if len(text) < n:
        return [text] if text else []
    step = -(-len(text) // n)
    return [text[i:i + step] for i in range(0, len(text), step)]


def group(entries: list[tuple[bool, str]]) -> tuple[list[str], str]:
    """(is_model, text) entries -> texts after each model turn, and the text before the first."""
    results: list[str] = []
    before: list[str] = []
    previous_model = False
    for is_model, text in entries:
        if is_model:
            if not previous_model:
                results.append("")
        elif results:
            results[-1] = "\n".join(t for t in (results[-1], text) if t)
        else:
            before.append(text)
        previous_model = is_model
    return results, "\n".join(t for t in before if t)
