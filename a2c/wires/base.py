"""The `Wire` base class and the registry of the wires by name (`WIRES`, filled by the `register`
class decorator, as Inspect AI registers one class per model provider), and the table of which
wires each built-in provider serves (`PROVIDER_WIRES`, read by the compiler's suite checks and
the gateway's provider list, so the two cannot drift).

A wire is one class in one module (anthropic, openai_chat, openai_responses, gemini) holding
everything that differs between the formats: its routes and query parameters, where a request
names its model and asks to stream, its cost fields (caps, counts) read and rewritten, the
provider-side tools it may name, the native usage fields (read and written), the error bodies,
a request read as conversation items, an answer read as a turn, the question an analysis asks
in it, and the answers the scripted driver writes in it. What every area does with that stays
in the area; a new wire is one module and its `@register`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from a2c.wires.records import Answer, Conversation, Item, Turn
from a2c.wires.routes import Endpoint, Route, match, versioned
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
    provider answers a spent credit balance with; `rank`: where it stands in every list of
    wires; `vllm_rank`: where it stands in a vLLM server's list (None: vLLM does not serve
    it); `fallback`: the wire whose shapes answer a path no wire claims (one wire sets it)."""

    name: str = ""
    provider: str = ""
    auth: str = "bearer"
    budget_status: int = 429
    rank: int = 100
    vllm_rank: int | None = None
    fallback: bool = False

    # -- routes (a2c.wires.routes)
    endpoints: tuple[Endpoint, ...] = ()
    version: str = "/v1"
    """The version root a path sent without one is read under (`routes.versioned`)."""
    query_keys: dict[str, tuple[str, ...]] = {}
    """The query parameters a request may forward, with their allowed values (`key=`, a Gemini
    client's way of sending its key, is read as the run key and never forwarded)."""
    headers: dict[str, frozenset[str] | None] = {}
    """Agent headers (lower case) this wire's clients send that may go upstream: None for any
    value, or the values a comma-list header may keep (the gateway's routes.forward_headers)."""
    client_headers: dict[str, str] = {}
    """Headers a client of this wire sends on every request (the analysis's question too)."""
    path_looks: tuple[str, ...] = ()
    """Prefixes of paths that look like this wire's (the shape of a refusal of a path no route
    claims)."""
    streams_json_array: bool = False
    """A stream may come as one JSON array of answers (Gemini without alt=sse)."""

    def looks_like_path(self, path: str) -> bool:
        return path.startswith(self.path_looks)

    def looks_like_body(self, body: dict) -> bool:
        """Whether a request body of unknown wire reads as this wire's (the wires are asked in
        `rank` order; this default claims any body, so the first wire that keeps it takes what
        the wires before it left: Gemini's)."""
        return True

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

    def provider_tools(self, body: dict) -> list[str]:
        """The provider-side tools (or fields asking for them) a request names ([] when none).

        Each wire lets a request name tools the *provider* runs: web search and fetch, code
        execution in the provider's container, remote MCP servers, file search, image
        generation, Google Search grounding. Their work is billed apart from tokens (per search,
        per container hour, per image), so the gateway cannot meter or budget it, and it reaches
        the network on the agent's behalf from a sandbox that has none (a held-out answer is one
        web search away): the gateway refuses a request that names one (400 in the wire's
        shape, never forwarded). Tools the *client* runs (functions, custom tools, Anthropic's
        bash/text editor/computer use, OpenAI's local shell, Codex's namespaces) are ordinary
        tokens and pass."""
        return []

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

    # -- the analysis's one question (runtime/driver_gateway/session.py)
    def question(self, model: str, system: str, user: str, max_tokens: int
                 ) -> tuple[str, dict[str, Any]]:
        """(path, body) of a plain, non-streaming question in this wire."""
        raise NotImplementedError

    # -- the scripted driver's answers (agents/scripted_driver/server.py)
    def answer(self, answer: Answer) -> dict:
        """`answer` as this wire's whole JSON response."""
        raise NotImplementedError

    def answer_stream(self, answer: Answer, conv: Conversation, query: str
                      ) -> tuple[list[bytes], str]:
        """`answer` as the chunks of this wire's stream, and their content type (`query`: the
        request's query string)."""
        raise NotImplementedError

    def count_answer(self, tokens: int) -> dict:
        """The answer of this wire's token-counting route."""
        return {"input_tokens": tokens}

    # -- shared by the readers
    def usage_of(self, *objs: Any) -> Usage:
        """The usage the JSON objects of one answer report, in order."""
        u = Usage()
        for obj in objs:
            self.read_usage(obj, u)
        return u


WIRES: dict[str, Wire] = {}
"""The wires by name, in `Wire.rank` order (filled by the wire modules)."""


def positive_int(value: Any) -> int | None:
    """A count field that holds a positive int, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def register(cls: type[Wire]) -> type[Wire]:
    """Class decorator: one instance of the wire in `WIRES`, kept in `Wire.rank` order."""
    WIRES[cls.name] = cls()
    ordered = sorted(WIRES.items(), key=lambda kv: kv[1].rank)
    WIRES.clear()
    WIRES.update(ordered)
    return cls


def fallback_wire() -> Wire:
    """The wire whose shapes answer a path no wire claims (OpenAI Chat's)."""
    return next(w for w in WIRES.values() if w.fallback)


def shape(wire: str | None) -> Wire:
    """The wire named, or the fallback for a name no wire has."""
    return WIRES.get(wire or "") or fallback_wire()


def route(path: str) -> Route:
    """The route of a request path among the registered wires (routes.NO_ROUTE for none)."""
    return match(WIRES.values(), path)


def normalize(path: str) -> str:
    """A request path under its version root (routes.versioned)."""
    return versioned(WIRES.values(), path)


def generation_call(wire: str | None, path: str | None) -> bool:
    """Whether a recorded call asked the model for a turn: by its path as the gateway routed
    it; a record without a path counts when its wire is known."""
    if path:
        return route(normalize(path)).generation
    return wire in WIRES


def wire_for_path(path: str | None) -> Wire | None:
    """The wire a request path belongs to, as the gateway routes it (None for no route)."""
    name = route(normalize(path)).wire if path else None
    return WIRES.get(name) if name else None


def looks_like_path(path: str, default: str | None) -> str | None:
    """The wire whose error shape answers a refused path: by its look, else `default`."""
    return next((w.name for w in WIRES.values() if w.looks_like_path(path)), default)


def request_streams(rt: Route, body: Any) -> bool:
    """Whether a request asks for a stream (Gemini: by its path; the others: `stream: true`); a
    route no wire claims is read as the fallback wire's."""
    return shape(rt.wire).request_streams(rt, body)


def provider_wires() -> dict[str, tuple[str, ...]]:
    """Each built-in provider's wires, providers in name order, wires in `Wire.rank` order."""
    out: dict[str, list[str]] = {}
    for wire in WIRES.values():
        out.setdefault(wire.provider, []).append(wire.name)
    return {p: tuple(out[p]) for p in sorted(out)}


def vllm_wires() -> tuple[str, ...]:
    """The wires a vLLM server serves from one port, in `Wire.vllm_rank` order."""
    served = [w for w in WIRES.values() if w.vllm_rank is not None]
    return tuple(w.name for w in sorted(served, key=lambda w: w.vllm_rank or 0))


def error_body(wire: str | None, status: int, kind: str, message: str) -> tuple[bytes, dict]:
    """The provider's own error JSON for an answer the gateway gives itself, and extra headers
    (the fallback wire's shape for a path no wire claims).

    kind: auth | model | budget | upstream | timeout | not_served | bad_request. Refusals that a
    retry cannot mend carry `x-should-retry: false` (the Stainless SDKs behind the Anthropic and
    OpenAI clients obey it), so scaffolds stop instead of retrying into a spent budget."""
    headers = {"Content-Type": "application/json"}
    if kind in ("budget", "auth", "model", "not_served", "bad_request"):
        headers["x-should-retry"] = "false"
    return json.dumps(shape(wire).error(status, kind, message)).encode(), headers
