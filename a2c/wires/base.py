"""The `Wire` base class and the registry of the four wires by name (`WIRES`), and the table of
which wires each built-in provider serves (`PROVIDER_WIRES`, read by the compiler's suite checks
and the gateway's provider list, so the two cannot drift).

A wire is one class in one module (anthropic, openai_chat, openai_responses, gemini) holding
everything that differs between the formats: where a request names its model and asks to
stream, the native usage fields (read and written), the error bodies, a request read as
conversation items, an answer read as a turn. What every area does with that stays in the area.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from a2c.wires.records import Conversation, Item, Turn
from a2c.wires.routes import NAMES, Route, normalize, route
from a2c.wires.strict import Unreadable
from a2c.wires.usage import Usage


@dataclass
class Reading:
    """What a generation request may cost, read once and strictly (`Wire.read_request`): its
    own output cap (the smallest it names; None for none), the candidates it asks for, and its
    inline media parts (images; documents, audio and video), whose data bytes do not bound their
    tokens and are reserved by kind instead (admission.input_estimate)."""

    cap: int | None = None
    candidates: int = 1
    images: int = 0
    long_media: int = 0
    media_bytes: int = 0

    def media(self, kind: str, data: Any) -> None:
        """Count one inline media part: `kind` is image | long | text (text-like data, e.g. a
        text/plain file: its bytes bound its tokens and stay counted as text)."""
        if kind == "image":
            self.images += 1
        elif kind == "long":
            self.long_media += 1
        if kind != "text" and isinstance(data, str):
            self.media_bytes += len(data)


def referenced(what: str) -> Unreadable:
    """The refusal of media a request names by URL or by a provider file id."""
    return Unreadable(f"{what} names its content by URL or provider file id: the provider "
                      "would fetch it (network the sandbox does not have) and its size is not "
                      "in the request; send the content inline (base64)")


class Wire:
    """One wire format. `provider`: the built-in provider that serves it; `auth`: the header its
    key goes in (`bearer`: `Authorization: Bearer`); `budget_status`: the HTTP status the
    provider answers a spent credit balance with."""

    name: str = ""
    provider: str = ""
    auth: str = "bearer"
    budget_status: int = 429

    # -- the request's routing fields
    def request_model(self, rt: Route, body: Any) -> str | None:
        """The model a request names: in the path (Gemini, model cards) or the body's `model`."""
        if rt.path_model:
            return rt.path_model
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            return body["model"]
        return None

    def request_streams(self, rt: Route, body: Any) -> bool:
        return isinstance(body, dict) and body.get("stream") is True

    # -- what a call may cost (the gateway's admission reads it, and lowers the cap to what a
    #    budget has left)
    def read_request(self, body: dict) -> Reading:
        """The one reading of a generation request's cost fields: caps and counts must be JSON
        integers in range, fields that change the price or volume in ways the gateway cannot
        meter are refused, media named by URL or file id are refused. Unreadable (the message
        names the field) for a request refused."""
        raise NotImplementedError

    def output_cap(self, body: dict) -> tuple[int | None, int]:
        """(the request's own output cap or None, the number of candidates it asks for)."""
        reading = self.read_request(body)
        return reading.cap, reading.candidates

    def set_output_cap(self, body: dict, cap: int) -> None:
        raise NotImplementedError

    def cap_fields_differ(self, body: dict) -> bool:
        """Whether the request names its output cap in more than one field, with different
        values (OpenAI Chat's max_tokens and max_completion_tokens)."""
        return False

    def count_request(self, body: dict, path: str) -> tuple[str, dict] | None:
        """The provider's token-counting request for the input of the generation request
        `body` sent to `path` (None for a wire without a counting route): the gateway asks it
        when its input bound does not fit a budget (admission.admit). Fields that only shape
        the answer are left out; any other field goes along, so input the count route does
        not accept fails the count instead of being left uncounted."""
        return None

    def count_of(self, answer: Any) -> int | None:
        """The input tokens a counting route's answer reports (None if it reports none)."""
        return None

    def ask_stream_usage(self, body: dict) -> bool:
        """Make a streaming request report its usage in the stream; whether the body changed
        (only OpenAI Chat needs asking; the others report usage in-stream by themselves)."""
        return False

    # -- usage
    def read_usage(self, obj: Any, u: Usage) -> None:
        """Fold one JSON object (a whole answer, or one streamed event's data) into `u`."""
        raise NotImplementedError

    def usage_fields(self, u: Usage) -> dict:
        """`u` in this wire's own usage fields."""
        raise NotImplementedError

    # -- errors
    def error(self, status: int, kind: str, message: str) -> dict:
        """The provider's own error body. kind: auth | model | budget | upstream | timeout |
        not_served | bad_request."""
        raise NotImplementedError

    # -- reading bodies back
    def request_items(self, body: dict[str, Any]) -> list[Item]:
        raise NotImplementedError

    def response(self, body: dict[str, Any]) -> Turn:
        """The turn in a whole JSON answer."""
        raise NotImplementedError

    def response_stream(self, events: list[tuple[str | None, Any]]) -> Turn:
        """The turn in a streamed answer's events (`sse.events`)."""
        raise NotImplementedError

    def conversation(self, body: dict, model: str = "", stream: bool = False) -> Conversation:
        """The scripted driver's view of a request (for Gemini the model and streaming come
        from the path)."""
        raise NotImplementedError

    # -- shared by the readers
    def usage_of(self, *objs: Any) -> Usage:
        """The usage the JSON objects of one answer report, in order."""
        u = Usage()
        for obj in objs:
            self.read_usage(obj, u)
        return u


WIRES: dict[str, Wire] = {}
"""The wires by name, in the order of `routes.NAMES` (filled by the wire modules)."""


def positive_int(value: Any) -> int | None:
    """A count field that holds a positive int, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def register(cls: type[Wire]) -> type[Wire]:
    """Class decorator: one instance of the wire in `WIRES`, kept in `routes.NAMES` order."""
    WIRES[cls.name] = cls()
    ordered = sorted(WIRES.items(), key=lambda kv: NAMES.index(kv[0]))
    WIRES.clear()
    WIRES.update(ordered)
    return cls


def wire_for_path(path: str | None) -> Wire | None:
    """The wire a request path belongs to, as the gateway routes it (None for no route)."""
    name = route(normalize(path)).wire if path else None
    return WIRES.get(name) if name else None


def request_streams(rt: Route, body: Any) -> bool:
    """Whether a request asks for a stream (Gemini: by its path; the others: `stream: true`); a
    route no wire claims is read as OpenAI Chat's."""
    wire = WIRES.get(rt.wire or "") or WIRES["openai-chat"]
    return wire.request_streams(rt, body)


def provider_wires() -> dict[str, tuple[str, ...]]:
    """Each built-in provider's wires, providers in name order, wires in `routes.NAMES` order."""
    out: dict[str, list[str]] = {}
    for wire in WIRES.values():
        out.setdefault(wire.provider, []).append(wire.name)
    return {p: tuple(out[p]) for p in sorted(out)}


def error_body(wire: str | None, status: int, kind: str, message: str) -> tuple[bytes, dict]:
    """The provider's own error JSON for an answer the gateway gives itself, and extra headers
    (the OpenAI shape for a path no wire claims).

    kind: auth | model | budget | upstream | timeout | not_served | bad_request. Refusals that a
    retry cannot mend carry `x-should-retry: false` (the Stainless SDKs behind the Anthropic and
    OpenAI clients obey it), so scaffolds stop instead of retrying into a spent budget."""
    headers = {"Content-Type": "application/json"}
    if kind in ("budget", "auth", "model", "not_served", "bad_request"):
        headers["x-should-retry"] = "false"
    shape = WIRES.get(wire or "") or WIRES["openai-chat"]
    return json.dumps(shape.error(status, kind, message)).encode(), headers
