"""How a request path is read as a wire, the same way by every area: the gateway admits and
meters by it, the analysis replays its record by it, the scripted driver answers by it. A wire
is chosen from the path alone (a scaffold does not say which SDK it is).

Each wire declares its own routes (`Wire.endpoints`, `Wire.query_keys`); this module only
matches a path against them. The routes are an exact allow-list (issue 23): generation
(metered, counted, pinned, budgeted) and token counting (free at every provider, pinned), plus
the model lists, which the gateway answers itself from the run's pinned models. Nothing else on
a provider's API (message batches, files, `:batchGenerateContent`, model deletion, fine-tuning)
has a route, so nothing else can be reached with the host's provider key.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Protocol

MODEL_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
"""A model id as one safe path segment: no dot-only names, no separators, nothing encoded."""


@dataclass(frozen=True)
class Endpoint:
    """One path a wire serves. `path` is exact but for `{model}`, one model id segment
    (`MODEL_SEGMENT`); `kind` is generate (the model answers a turn) | count (token counting) |
    models (a model list or one model's card, answered by the gateway itself, never
    forwarded); `stream`: the path itself asks for a stream (Gemini's
    `:streamGenerateContent`)."""

    path: str
    kind: str
    method: str = "POST"
    stream: bool = False

    @property
    def pattern(self) -> re.Pattern:
        return _pattern(self.path)


@cache
def _pattern(path: str) -> re.Pattern:
    return re.compile("^" + re.escape(path).replace(re.escape("{model}"), f"({MODEL_SEGMENT})")
                      + "$")


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


class Routed(Protocol):
    """What the matching needs of a wire (a2c.wires.base.Wire)."""

    name: str
    version: str
    endpoints: tuple[Endpoint, ...]


def match(wires: Iterable[Routed], path: str) -> Route:
    """The route of a request path among `wires` (`NO_ROUTE` when none claims it); the path
    is matched exactly, so `/v1/messages/batches` or `/v1/../v1/files` find nothing."""
    p = urllib.parse.urlsplit(path).path
    for wire in wires:
        for endpoint in wire.endpoints:
            m = endpoint.pattern.match(p)
            if m:
                return Route(wire.name, endpoint.kind == "generate",
                             m.group(1) if m.groups() else None, endpoint.stream,
                             kind=endpoint.kind, method=endpoint.method)
    return NO_ROUTE


def versioned(wires: Iterable[Routed], path: str) -> str:
    """The canonical form of a request path: a scaffold given a base URL without `/v1` (or
    Gemini's `/v1beta`) sends `/chat/completions`, `/messages`, `/models/m:generateContent`;
    such a path is read (and forwarded) under the version root of the first wire that serves
    it there (`Wire.version`). Applied only to paths the gateway already found free of dot
    segments and encodings."""
    wires = list(wires)
    split = urllib.parse.urlsplit(path)
    for wire in wires:
        if match(wires, wire.version + split.path).wire == wire.name:
            return wire.version + split.path + ("?" + split.query if split.query else "")
    return path
