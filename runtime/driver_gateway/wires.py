"""What differs between the four wire formats the gateway speaks, in one place.

A wire is chosen from the request path alone (a2c.wire_formats, shared with the analysis). For
each wire this module knows: where the model is named (body field, or the Gemini path), whether
the request streams, how to read the provider's own usage fields from a JSON answer or from an
SSE stream (`UsageMeter`), and the error bodies the gateway sends when it answers itself. The
error shapes copy each provider's documented ones, so a scaffold shows its normal message and
takes its normal branch (retry on 5xx/timeout; stop on out-of-credit).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from a2c.wire_formats import WIRES, Route, normalize, route  # noqa: F401 - the gateway's names


def request_model(rt: Route, body: dict | None) -> str | None:
    if rt.path_model:
        return rt.path_model
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return body["model"]
    return None


def request_streams(rt: Route, body: dict | None, query: str) -> bool:
    if rt.wire == "gemini":
        return rt.path_stream
    return isinstance(body, dict) and body.get("stream") is True


# ----------------------------------------------------------------------------- errors
def error_body(wire: str | None, status: int, kind: str, message: str) -> tuple[bytes, dict]:
    """The provider's own error JSON for a gateway answer, and extra headers.

    kind: auth | model | budget | upstream | timeout | not_served | bad_request.
    Budget answers are the provider's out-of-credit shape and carry `x-should-retry: false`
    (the Stainless SDKs behind the Anthropic and OpenAI clients obey it), so scaffolds stop
    instead of retrying into a spent budget."""
    headers = {"Content-Type": "application/json"}
    if kind in ("budget", "auth", "model", "not_served", "bad_request"):
        headers["x-should-retry"] = "false"
    if wire == "anthropic":
        etype = {"auth": "authentication_error", "timeout": "timeout_error",
                 "upstream": "api_error", "not_served": "not_found_error"}.get(
                     kind, "invalid_request_error")
        body = {"type": "error", "error": {"type": etype, "message": message}}
    elif wire == "gemini":
        gstatus = {"auth": "UNAUTHENTICATED", "model": "INVALID_ARGUMENT",
                   "budget": "RESOURCE_EXHAUSTED", "timeout": "DEADLINE_EXCEEDED",
                   "upstream": "UNAVAILABLE", "not_served": "NOT_FOUND",
                   "bad_request": "INVALID_ARGUMENT"}[kind]
        err: dict = {"code": status, "message": message, "status": gstatus}
        if kind == "budget":
            # A per-day quota violation: Gemini CLI classifies it as terminal (no retry).
            err["details"] = [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                 "violations": [{"quotaMetric": "a2c/driver_budget",
                                 "quotaId": "A2CDriverBudgetPerDay",
                                 "quotaDimensions": {}, "description": message}]},
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                 "reason": "QUOTA_EXHAUSTED", "domain": "a2c.driver-gateway"}]
        body = {"error": err}
    else:   # openai-chat, openai-responses, unknown paths: the OpenAI shape
        etype, code = {
            "auth": ("invalid_request_error", "invalid_api_key"),
            "model": ("invalid_request_error", "model_not_found"),
            "budget": ("insufficient_quota", "insufficient_quota"),
            "timeout": ("server_error", "timeout"),
            "upstream": ("server_error", "upstream_unavailable"),
            "not_served": ("invalid_request_error", "not_found"),
            "bad_request": ("invalid_request_error", None)}[kind]
        body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return json.dumps(body).encode(), headers


BUDGET_STATUS = {"anthropic": 400, "openai-chat": 429, "openai-responses": 429, "gemini": 429}
"""Out-of-credit statuses: Anthropic answers a spent credit balance with 400
invalid_request_error; OpenAI with 429 insufficient_quota (its clients treat that code as final);
Gemini with 429 RESOURCE_EXHAUSTED and a per-day QuotaFailure."""


# ----------------------------------------------------------------------------- usage
@dataclass
class Usage:
    """Normalised usage: `input_tokens` are the uncached input tokens; cached reads and cache
    writes are counted apart (each provider prices them apart); `output_tokens` include
    reasoning ("thinking") tokens, which every provider bills as output."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None
    seen: bool = False

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + \
            self.cache_write_tokens


def _int(v) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _anthropic(u: Usage, usage: dict, final: bool) -> None:
    # message_start carries input and cache counts; message_delta the cumulative output (and,
    # on newer servers, input counts again): later non-zero values win.
    for src, dst in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                     ("cache_read_input_tokens", "cache_read_tokens"),
                     ("cache_creation_input_tokens", "cache_write_tokens")):
        if src in usage and (usage[src] or not final):
            setattr(u, dst, _int(usage[src]))
    u.seen = True


def _openai_chat(u: Usage, usage: dict) -> None:
    prompt = _int(usage.get("prompt_tokens"))
    cached = _int((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
    u.input_tokens, u.cache_read_tokens = max(prompt - cached, 0), cached
    u.output_tokens = _int(usage.get("completion_tokens"))
    u.seen = True


def _openai_responses(u: Usage, usage: dict) -> None:
    prompt = _int(usage.get("input_tokens"))
    cached = _int((usage.get("input_tokens_details") or {}).get("cached_tokens"))
    u.input_tokens, u.cache_read_tokens = max(prompt - cached, 0), cached
    u.output_tokens = _int(usage.get("output_tokens"))
    u.seen = True


def _gemini(u: Usage, meta: dict) -> None:
    prompt = _int(meta.get("promptTokenCount")) + _int(meta.get("toolUsePromptTokenCount"))
    cached = _int(meta.get("cachedContentTokenCount"))
    u.input_tokens, u.cache_read_tokens = max(prompt - cached, 0), cached
    u.output_tokens = _int(meta.get("candidatesTokenCount")) + _int(meta.get("thoughtsTokenCount"))
    u.seen = True


def read_usage(wire: str, obj: dict, u: Usage) -> None:
    """Fold one JSON object (a whole answer, or one SSE event's data) into `u`."""
    if not isinstance(obj, dict):
        return
    if wire == "anthropic":
        kind = obj.get("type")
        if kind == "message_start" and isinstance(obj.get("message"), dict):
            msg = obj["message"]
            u.model = msg.get("model") or u.model
            if isinstance(msg.get("usage"), dict):
                _anthropic(u, msg["usage"], final=False)
        elif kind == "message_delta" and isinstance(obj.get("usage"), dict):
            _anthropic(u, obj["usage"], final=True)
        elif kind == "message" or "usage" in obj and kind is None:
            u.model = obj.get("model") or u.model
            if isinstance(obj.get("usage"), dict):
                _anthropic(u, obj["usage"], final=False)
    elif wire == "openai-chat":
        u.model = obj.get("model") or u.model
        if isinstance(obj.get("usage"), dict):
            _openai_chat(u, obj["usage"])
    elif wire == "openai-responses":
        resp = obj.get("response") if isinstance(obj.get("response"), dict) else obj
        if obj.get("type", "").startswith("response.") and resp is obj:
            return
        u.model = resp.get("model") or u.model
        if isinstance(resp.get("usage"), dict):
            _openai_responses(u, resp["usage"])
    elif wire == "gemini":
        u.model = obj.get("modelVersion") or u.model
        if isinstance(obj.get("usageMetadata"), dict):
            _gemini(u, obj["usageMetadata"])


class UsageMeter:
    """Reads usage from the bytes of an answer as they pass: whole JSON, or SSE events parsed
    incrementally (a `data:` line split across chunks is kept until its end arrives)."""

    def __init__(self, wire: str, stream: bool):
        self.wire, self.stream = wire, stream
        self.usage = Usage()
        self._buf = b""
        self._whole: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        if not self.stream:
            self._whole.append(chunk)
            return
        self._buf += chunk
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            line, self._buf = self._buf[:nl].rstrip(b"\r"), self._buf[nl + 1:]
            self._line(line)

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return
        try:
            obj = json.loads(data)
        except ValueError:
            return
        read_usage(self.wire, obj, self.usage)

    def finish(self) -> Usage:
        if self.stream:
            if self._buf:
                self._line(self._buf.rstrip(b"\r"))
                self._buf = b""
        else:
            raw = b"".join(self._whole)
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            if isinstance(obj, list):          # Gemini REST may answer a JSON array
                for item in obj:
                    read_usage(self.wire, item, self.usage)
            elif isinstance(obj, dict):
                read_usage(self.wire, obj, self.usage)
        return self.usage
