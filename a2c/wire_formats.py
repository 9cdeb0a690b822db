"""The four driver wire formats' request paths, read one way by every area: the gateway routes
and meters by them, the analysis replays its record by them. A wire is chosen from the path alone
(a scaffold does not say which SDK it is); `generation` says whether the model answers a turn
(metered, counted, pinned) or the call is bookkeeping (count_tokens, a model list). Stdlib only,
like the other shared helpers of `a2c/`.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

WIRES = ("anthropic", "openai-chat", "openai-responses", "gemini")

_GEMINI_PATH = re.compile(r"^/(v1beta|v1|v1alpha)/(?:tunedModels|models)/([^/:]+):([A-Za-z]+)$")


@dataclass(frozen=True)
class Route:
    """A request path read as a wire: `generation` is a call that the model answers (metered,
    counted, pinned); anything else on the wire (count_tokens, model lists) passes unmetered."""

    wire: str | None
    generation: bool
    path_model: str | None = None      # Gemini names the model in the path
    path_stream: bool = False          # Gemini :streamGenerateContent


_BARE_GEMINI = re.compile(r"^/(?:tunedModels|models)/[^/:]+:[A-Za-z]+$")


def normalize(path: str) -> str:
    """The canonical form of a request path: a scaffold given a base URL without `/v1` (or
    Gemini's `/v1beta`) sends `/chat/completions`, `/messages`, `/models/m:generateContent`;
    those are read (and forwarded) as `/v1/...` and `/v1beta/...`."""
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
    """The wire of a request path (`Route(None, False)` when no wire claims it)."""
    p = urllib.parse.urlsplit(path).path
    if p == "/v1/messages":
        return Route("anthropic", True)
    if p.startswith("/v1/messages/"):
        return Route("anthropic", False)
    if p == "/v1/chat/completions":
        return Route("openai-chat", True)
    if p == "/v1/responses":
        return Route("openai-responses", True)
    if p.startswith("/v1/responses/"):
        return Route("openai-responses", False)
    m = _GEMINI_PATH.match(p)
    if m:
        method = m.group(3)
        gen = method in ("generateContent", "streamGenerateContent")
        return Route("gemini", gen, urllib.parse.unquote(m.group(2)),
                     method == "streamGenerateContent")
    if p.startswith(("/v1beta/", "/v1alpha/")):
        return Route("gemini", False)
    if p == "/v1/models" or p.startswith("/v1/models/"):
        return Route("openai-chat", False)       # a model list: served by any OpenAI-style upstream
    return Route(None, False)


def generation_call(wire: str | None, path: str | None) -> bool:
    """Whether a recorded call asked the model for a turn: by its path as the gateway routed
    it; a record without a path counts when its wire is known."""
    if path:
        return route(normalize(path)).generation
    return wire in WIRES
