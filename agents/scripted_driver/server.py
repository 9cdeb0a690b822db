"""The scripted driver's HTTP server: every registered wire, streaming and not, on loopback. Each
wire writes its own answers (`Wire.answer`, `Wire.answer_stream`, `Wire.count_answer`), from the
reply the player chose put as a wire-neutral `a2c.wires.Answer`.

Any path prefix before the API path is accepted (`/v1/messages`, `/anthropic/v1/messages`,
`/api/v1/chat/completions`), since each scaffold builds its URL from the base URL differently.
Streams are sent with chunked transfer encoding, one event per chunk, so keep-alive clients and
the gateway's pass-through see real event boundaries. Every reply served is one JSON line in the
log: turn, kind, wire, stream, usage, model, so a test can sum the script's usage and compare it
with what the gateway metered.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

from a2c.agents.scripted_driver import conversation, player
from a2c.agents.scripted_driver.script import Script
from a2c.unixhttp import Handler, LoopbackServer, serve_in_thread
from a2c.wires import WIRES, Answer, ToolCall, normalize, shape
from a2c.wires import route as wire_route

MAX_BODY = 64 * 1024 * 1024
DEFAULT_MODEL = "scripted"
_API_ROOT = re.compile(r"/v1(beta)?/")


def route(path: str) -> tuple[str, str, str]:
    """(wire, action, gemini model) for a request path, or ("", "", "") when unknown: the
    gateway's own routes (each wire's `endpoints`), the path as it is or after any prefix
    before `/v1` or `/v1beta` (a scaffold pointed here without the gateway builds its URL from
    the base URL its own way). action: generate | stream (Gemini's streaming route) | count."""
    found = wire_route(path)
    prefixed = _API_ROOT.search(path)
    if found.wire is None:
        found = wire_route(normalize(path[prefixed.start():] if prefixed else path))
    if found.kind == "count":
        return found.wire, "count", found.path_model or ""
    if found.kind == "generate":
        return found.wire, "stream" if found.path_stream else "generate", found.path_model or ""
    return "", "", ""


def _error(wire: str | None, status: int, message: str) -> dict:
    """The wire's own body for a request the driver cannot read (the fallback wire's shape for
    a path no wire claims)."""
    return shape(wire).error(status, "bad_request", message)


class _Log:
    def __init__(self, path: Path | None):
        self.path = path
        self.lock = threading.Lock()
        self.entries: list[dict] = []

    def write(self, entry: dict) -> None:
        with self.lock:
            self.entries.append(entry)
            if self.path is not None:
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(entry, sort_keys=True) + "\n")


class _Handler(Handler):     # quiet: the JSON log is the record
    server_version = "a2c-scripted-driver"
    server: _Server

    # ------------------------------------------------------------------ plumbing
    def _body(self) -> bytes:
        data = self.read_body(MAX_BODY)       # BodyTooLarge is a ValueError
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding in ("gzip", "deflate"):
            data = zlib.decompress(data, 47 if encoding == "gzip" else 15)
        return data

    def _json(self, status: int, value: dict) -> None:
        self.send_json(status, value, {"request-id": f"req_{int(time.time() * 1000)}"})

    def _stream(self, chunks: list[bytes], content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            self.write_chunk(chunk)
        self.end_chunks()

    # ------------------------------------------------------------------ requests
    def do_GET(self):  # noqa: N802
        path = urlsplit(self.path).path.rstrip("/")
        model = self.server.model
        if path.endswith("/models"):
            entry = {"id": model, "object": "model", "type": "model", "display_name": model,
                     "created": 0, "created_at": "2025-01-01T00:00:00Z", "owned_by": "a2c"}
            self._json(200, {"object": "list", "data": [entry], "has_more": False,
                             "first_id": model, "last_id": model,
                             "models": [{"name": f"models/{model}", "displayName": model,
                                         "supportedGenerationMethods": [
                                             "generateContent", "streamGenerateContent",
                                             "countTokens"]}]})
        elif re.search(r"/models/[^/]+$", path):
            name = path.rsplit("/", 1)[1]
            self._json(200, {"id": name, "object": "model", "type": "model", "display_name": name,
                             "name": f"models/{name}", "created": 0, "owned_by": "a2c"})
        elif path.endswith("/health"):
            self._json(200, {"ok": True, "script": self.server.script.id, "model": model})
        else:
            self._json(404, _error(None, 404, f"no such path: {path}"))

    def do_POST(self):  # noqa: N802
        split = urlsplit(self.path)
        wire, action, gemini_model = route(split.path.rstrip("/"))
        try:
            raw = self._body()          # read first, so a kept-alive connection stays in step
        except (ValueError, zlib.error) as exc:
            self.close_connection = True
            self._json(400, _error(wire, 400, f"cannot read: {exc}"))
            return
        if not wire:
            self._json(404, _error(None, 404, f"no such path: {split.path}"))
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the request body is not a JSON object")
        except ValueError as exc:
            self._json(400, _error(wire, 400, f"cannot read the request: {exc}"))
            return
        if action == "count":
            tokens = max(1, len(json.dumps(body)) // 4)
            self._json(200, WIRES[wire].count_answer(tokens))
            return
        conv = conversation.read(wire, body, gemini_model, stream=action == "stream")
        reply = player.choose(self.server.script, conv)
        model = conv.model or self.server.model
        seed = f"{self.server.script.id}:{wire}:{reply.turn}:{len(conv.results)}:{reply.repeat}"
        self.server.log.write({
            "ts": round(time.time(), 3), "turn": reply.turn, "repeat": reply.repeat,
            "kind": reply.kind, "via": reply.via, "wire": wire, "stream": conv.stream,
            "model": model, "usage": reply.usage.as_dict(), "history_turns": len(conv.results),
            "tools": [c.name for c in reply.calls]})
        answer = Answer(reply.text, [ToolCall("", c.name, c.arguments, kind=c.kind)
                                     for c in reply.calls], reply.usage, model, seed)
        if conv.stream:
            self._stream(*WIRES[wire].answer_stream(answer, conv, split.query))
        else:
            self._json(200, WIRES[wire].answer(answer))


class _Server(LoopbackServer):
    def __init__(self, address, script: Script, log: _Log, model: str):
        self.script, self.log, self.model = script, log, model
        super().__init__(address, _Handler)


class ScriptedDriver:
    """The server in this process (for tests): `start()` returns the base URL, `stop()` ends it.
    `entries` holds what the log file gets, one dict per reply served."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0,
                 log: str | Path | None = None, model: str = DEFAULT_MODEL):
        self.script = script
        self._log = _Log(Path(log) if log else None)
        self._address = (host, port)
        self._model = model
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def entries(self) -> list[dict]:
        return list(self._log.entries)

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the driver first"
        return self._server.server_address[1]

    def bind(self) -> int:
        """Open the listening socket (once) and return its port."""
        if self._server is None:
            self._server = _Server(self._address, self.script, self._log, self._model)
        return self.port

    def start(self) -> str:
        self.bind()
        # a short poll interval: stop() returns at once (tests start many drivers)
        self._thread = serve_in_thread(self._server, "scripted-driver", poll_interval=0.05)
        return f"http://{self._address[0]}:{self.port}"

    def serve_forever(self) -> None:
        """Run in the calling thread (the process entry point)."""
        self.bind()
        self._server.serve_forever()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedDriver:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
