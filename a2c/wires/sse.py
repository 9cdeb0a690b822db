"""Server-sent events, split and joined in one place: three of the four wires stream as SSE
(`event:` name lines, `data:` JSON lines, a blank line between events; OpenAI ends with
`data: [DONE]`), and Gemini streams as SSE with `alt=sse`.

Split whole (`events`: the analysis reads a recorded stream back), split as the bytes pass
(`DataLines`: the gateway meters a stream it relays, where a line may be cut across chunks), and
joined (`event`: the scripted driver writes its streams).
"""

from __future__ import annotations

import json
from typing import Any


def event(name: str | None, data: dict | str) -> bytes:
    """One event: an optional `event:` line, one `data:` line (JSON, compact), a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return ((f"event: {name}\n" if name else "") + f"data: {payload}\n\n").encode()


def events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of every event in `raw`; data that is not JSON is kept as a
    string ("[DONE]")."""
    out: list[tuple[str | None, Any]] = []
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if not data:
            continue
        joined = "\n".join(data)
        try:
            out.append((name, json.loads(joined)))
        except ValueError:
            out.append((name, joined))
    return out


def looks_like(raw: bytes) -> bool:
    """Whether a body is an event stream (a recorded answer does not say)."""
    head = raw.lstrip()[:200]
    return head.startswith(b"event:") or head.startswith(b"data:") or b"\ndata:" in head


class DataLines:
    """The JSON of each `data:` line of a stream fed in chunks of any size: a line split across
    chunks is kept until its end arrives; `[DONE]` and data that is not JSON are skipped."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[Any]:
        self._buf += chunk
        out = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return out
            line, self._buf = self._buf[:nl].rstrip(b"\r"), self._buf[nl + 1:]
            out += self._line(line)

    def finish(self) -> list[Any]:
        """What an unterminated last line holds."""
        line, self._buf = self._buf.rstrip(b"\r"), b""
        return self._line(line) if line else []

    @staticmethod
    def _line(line: bytes) -> list[Any]:
        if not line.startswith(b"data:"):
            return []
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return []
        try:
            return [json.loads(data)]
        except ValueError:
            return []
