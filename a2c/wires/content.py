"""Reading the values every wire nests its text and arguments in: a string, a list of blocks or
parts, a block, a JSON-encoded argument string.

Two readings of text, kept apart on purpose: `text_of` is what the analysis shows (an image as
`[image]`, an unknown block as its JSON), `history_text` what the scripted driver matches its
`until` patterns against (tool results nested in any key a wire uses, nothing for an unknown
block); a script written against one must not change when the other does.
"""

from __future__ import annotations

import json
from typing import Any


def text_of(value: Any) -> str:
    """The text in a content value: a string, a list of blocks/parts, or a block."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (text_of(v) for v in value) if t)
    if isinstance(value, dict):
        for key in ("text", "output", "content"):
            if key in value and value[key] is not None:
                return text_of(value[key])
        if value.get("type") in ("image", "image_url", "input_image"):
            return "[image]"
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def history_text(value: Any) -> str:
    """The readable text in a content value of any wire (string, parts, blocks, nested), as the
    scripted driver reads a conversation's history."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (history_text(v) for v in value) if t)
    if isinstance(value, dict):
        for key in ("text", "output", "content", "response", "functionResponse", "result"):
            if key in value:
                inner = value[key]
                return inner if isinstance(inner, str) else \
                    (history_text(inner) or json.dumps(inner))
        return ""
    return str(value)


def arguments(value: Any) -> dict[str, Any]:
    """Tool arguments as an object (a JSON string is parsed; anything else kept under `raw` or
    `value`)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"raw": value}
        return parsed if isinstance(parsed, dict) else {"value": parsed}
    if value is None:
        return {}
    return {"value": value}


def lower_types(schema: Any) -> Any:
    """Gemini's OpenAPI-style schemas write types in capitals (STRING, OBJECT)."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else lower_types(v))
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [lower_types(v) for v in schema]
    return schema
