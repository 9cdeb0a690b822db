"""One readable line saying how an agent ended, from the last lines of its log.

Why: a scaffold that logs JSON events (Claude Code's `--output-format stream-json`, Codex's
`exec --json`, OpenHands' event lines) leaves raw JSON at the end of `logs/agent.log`; printing
those lines as the reason a run failed tells the reader nothing. The last thing the agent *said*
(a stream-json `result`, the last assistant text, an error message) is the reason; a log of plain
text lines gives its last line.
"""

from __future__ import annotations

import json
from typing import Any

WIDTH = 240


def _texts(value: Any) -> list[str]:
    """The text parts of a message's content (a string or a list of {type: text, text})."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


def _said(event: dict[str, Any]) -> str | None:
    """What one JSON log event says, or None for a tool call, a tool result, a system line."""
    kind = event.get("type")
    if kind == "result":                              # Claude Code: the run's final message
        text = event.get("result") or event.get("error")
        if isinstance(text, str) and text.strip():
            return text
        sub = event.get("subtype")
        return f"the agent CLI ended: {sub}" if sub else None
    if kind == "error" or "error" in event and isinstance(event.get("error"), (str, dict)):
        err = event.get("error") or event.get("message")
        if isinstance(err, dict):
            err = err.get("message") or json.dumps(err)[:WIDTH]
        return f"error: {err}" if isinstance(err, str) and err.strip() else None
    message = event.get("message")
    if isinstance(message, dict) and message.get("role", kind) == "assistant":
        texts = [t for t in _texts(message.get("content")) if t.strip()]
        return texts[-1] if texts else None
    item = event.get("item")                          # Codex: item.completed agent_message
    if isinstance(item, dict) and item.get("type") in ("agent_message", "assistant_message"):
        return item.get("text") if isinstance(item.get("text"), str) else None
    return None


def reason_line(tail: list[str] | None) -> str | None:
    """The last thing the agent said in `tail` (log lines, oldest first), on one line."""
    if not tail:
        return None
    for line in reversed(tail):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(("{", "[")):
            try:
                event = json.loads(stripped)
            except ValueError:
                continue                  # a JSON line cut short: says nothing readable
            said = _said(event) if isinstance(event, dict) else None
            if said and said.strip():
                return _one_line(said)
            continue
        return _one_line(stripped)
    return None


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= WIDTH else text[:WIDTH - 1] + "…"
