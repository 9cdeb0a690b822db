"""Reading recorded bodies of any wire: a request as conversation items, an answer (JSON, a JSON
array, or the raw bytes of a stream) as one turn, and the usage in an answer as it passes
(`UsageMeter`). A body whose wire is unknown is read by its shape; what cannot be read yields
nothing (never an exception)."""

from __future__ import annotations

import json
from typing import Any

from a2c.wires import sse
from a2c.wires.base import WIRES, shape
from a2c.wires.records import Item, Turn
from a2c.wires.usage import Usage

_READ_ERRORS = (TypeError, AttributeError, KeyError, ValueError, IndexError)


def request_items(wire: str | None, body: Any) -> list[Item]:
    """The conversation items of a request body ([] for what is not a readable request)."""
    if not isinstance(body, dict):
        return []
    try:
        reader = WIRES.get(wire or "") or next(
            (w for w in WIRES.values() if w.looks_like_body(body)), list(WIRES.values())[-1])
        return reader.request_items(body)
    except (TypeError, AttributeError, KeyError, ValueError):
        return []


def response_turn(wire: str | None, raw: bytes | None) -> Turn:
    """The agent turn in a response body (SSE or JSON); an empty turn for what cannot be read.
    An unknown wire is read as the fallback wire's (OpenAI Chat)."""
    if not raw:
        return Turn()
    reader = shape(wire)
    try:
        if sse.looks_like(raw):
            return reader.response_stream(sse.events(raw))
        try:
            body = json.loads(raw)
        except ValueError:
            return Turn()
        if isinstance(body, list):   # Gemini's streamGenerateContent without alt=sse: an array
            arrays = next(w for w in WIRES.values() if w.streams_json_array)
            return arrays.response_stream([(None, b) for b in body])
        return reader.response(body) if isinstance(body, dict) else Turn()
    except _READ_ERRORS:
        return Turn()


class _NoWire:
    """An answer on a path no wire claims: no usage to read."""

    def read_usage(self, obj: Any, u: Usage) -> None:
        return None


_NO_WIRE = _NoWire()


class UsageMeter:
    """Reads usage from the bytes of an answer as they pass: whole JSON (a Gemini REST stream
    may be a JSON array), or stream events parsed incrementally."""

    def __init__(self, wire: str, stream: bool):
        self.wire, self.stream = WIRES.get(wire) or _NO_WIRE, stream
        self.usage = Usage()
        self._lines = sse.DataLines()
        self._whole: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        if not self.stream:
            self._whole.append(chunk)
            return
        for obj in self._lines.feed(chunk):
            self.wire.read_usage(obj, self.usage)

    def finish(self) -> Usage:
        if self.stream:
            for obj in self._lines.finish():
                self.wire.read_usage(obj, self.usage)
            return self.usage
        try:
            obj = json.loads(b"".join(self._whole))
        except ValueError:
            obj = None
        for item in obj if isinstance(obj, list) else [obj]:
            self.wire.read_usage(item, self.usage)
        return self.usage
