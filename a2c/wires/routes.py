"""The four driver wire formats' request routes, read one way by every area: the gateway admits
and meters by them, the analysis replays its record by them, the scripted driver answers by
them. A wire is chosen from the path alone (a scaffold does not say which SDK it is).

The routes are an exact allow-list (issue 23): generation (metered, counted, pinned, budgeted)
and token counting (free at every provider, pinned), plus the model lists, which the gateway
answers itself from the run's pinned models. Nothing else on a provider's API (message batches,
files, `:batchGenerateContent`, model deletion, fine-tuning) has a route, so nothing else can be
reached with the host's provider key.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

NAMES = ("anthropic", "openai-chat", "openai-responses", "gemini")
"""The wires, in the order every list of them is written."""

# kinds: generate (the model answers a turn), count (token counting), models (a model list or
# one model's card, answered by the gateway itself, never forwarded)
_EXACT: dict[str, tuple[str, str, str]] = {
    # path: (method, wire, kind)
    "/v1/messages": ("POST", "anthropic", "generate"),
    "/v1/messages/count_tokens": ("POST", "anthropic", "count"),
    "/v1/chat/completions": ("POST", "openai-chat", "generate"),
    "/v1/responses": ("POST", "openai-responses", "generate"),
    "/v1/responses/input_tokens": ("POST", "openai-responses", "count"),
    "/v1/models": ("GET", "openai-chat", "models"),
    "/v1beta/models": ("GET", "gemini", "models"),
}
MODEL_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
"""A model id as one safe path segment: no dot-only names, no separators, nothing encoded."""
_GEMINI = re.compile(rf"^/(v1beta|v1)/models/({MODEL_SEGMENT}):"
                     r"(generateContent|streamGenerateContent|countTokens)$")
_MODEL_CARD = re.compile(rf"^/(v1|v1beta)/models/({MODEL_SEGMENT})$")
_GEMINI_KIND = {"generateContent": "generate", "streamGenerateContent": "generate",
                "countTokens": "count"}

QUERY_KEYS = {"anthropic": {"beta": ("true",)},
              "openai-chat": {}, "openai-responses": {},
              "gemini": {"alt": ("sse", "json")}}
"""The query parameters each wire may forward, with their allowed values (Claude Code sends
`?beta=true`; Gemini streams with `alt=sse`). `key=` (a Gemini client's way of sending its key)
is read as the run key and never forwarded."""


@dataclass(frozen=True)
class Route:
    """A request path read as a wire. `generation`: the model answers a turn (metered, counted,
    pinned, budgeted); `kind` is generate | count | models ("" when no route claims the path)."""

    wire: str | None
    generation: bool
    path_model: str | None = None      # Gemini names the model in the path (and model cards)
    path_stream: bool = False          # Gemini :streamGenerateContent
    kind: str = ""
    method: str = "POST"


NO_ROUTE = Route(None, False)
_BARE_GEMINI = re.compile(r"^/models/[^/]+:[A-Za-z]+$")


def normalize(path: str) -> str:
    """The canonical form of a request path: a scaffold given a base URL without `/v1` (or
    Gemini's `/v1beta`) sends `/chat/completions`, `/messages`, `/models/m:generateContent`;
    those are read (and forwarded) as `/v1/...` and `/v1beta/...`. Applied only to paths the
    gateway already found free of dot segments and encodings."""
    split = urllib.parse.urlsplit(path)
    p = split.path
    if _BARE_GEMINI.match(p):
        p = "/v1beta" + p
    elif p in ("/chat/completions", "/responses", "/messages", "/models") or \
            p.startswith(("/responses/", "/messages/", "/models/")):
        p = "/v1" + p
    else:
        return path
    return p + ("?" + split.query if split.query else "")


def route(path: str) -> Route:
    """The route of a request path (`NO_ROUTE` when the allow-list has none); the path is
    matched exactly, so `/v1/messages/batches` or `/v1/../v1/files` find nothing."""
    p = urllib.parse.urlsplit(path).path
    exact = _EXACT.get(p)
    if exact:
        method, wire, kind = exact
        return Route(wire, kind == "generate", kind=kind, method=method)
    m = _GEMINI.match(p)
    if m:
        kind = _GEMINI_KIND[m.group(3)]
        return Route("gemini", kind == "generate", m.group(2),
                     m.group(3) == "streamGenerateContent", kind=kind)
    m = _MODEL_CARD.match(p)
    if m:
        return Route("gemini" if m.group(1) == "v1beta" else "openai-chat", False, m.group(2),
                     kind="models", method="GET")
    return NO_ROUTE


def generation_call(wire: str | None, path: str | None) -> bool:
    """Whether a recorded call asked the model for a turn: by its path as the gateway routed
    it; a record without a path counts when its wire is known."""
    if path:
        return route(normalize(path)).generation
    return wire in NAMES
