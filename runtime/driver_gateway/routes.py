"""What of an agent's request may go upstream: the request target and the headers.

The gateway forwards only what it meters (issue 23). A request target is checked before anything
else: it must be a plain origin-form path with nothing a server might read differently from us
(`..` or `.` segments, empty segments, any %-encoding, backslashes, control characters), then
match one route of a wire exactly (`Wire.endpoints`), with its method, and carry only the query
parameters its wire allows (`Wire.query_keys`). The path and query forwarded upstream are
rebuilt from what matched, never copied.

Headers work the same way: an allow-list (`COMMON_HEADERS` and the headers the wires declare,
`Wire.headers`) goes upstream; everything else the agent sends (Authorization and the other key
headers, OpenAI-Organization/-Project, X-Forwarded-*, Host, proxy and SDK telemetry headers) is
dropped. A comma-list header a wire holds to a set of values (Anthropic's `anthropic-beta`) is
kept value by value.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from a2c.wires import WIRES, Route, normalize, route
from a2c.wires.routes import NO_ROUTE

_SAFE_PATH = re.compile(r"^(/[A-Za-z0-9_.:-]+)+$")
_SAFE_QUERY = re.compile(r"^[A-Za-z0-9_.=&-]*$")

COMMON_HEADERS = frozenset({"content-type", "accept", "user-agent"})
"""Agent headers that go upstream whatever the wire; each wire adds its own (`Wire.headers`).
The provider key header is set by the gateway itself."""


@dataclass(frozen=True)
class Target:
    """A request target that passed: its route, the path to forward (version prefix added,
    `key=` removed) and the run key if the query carried one."""

    route: Route
    path: str
    query_key: str | None = None


@dataclass(frozen=True)
class Refused:
    status: int
    kind: str          # not_served | bad_request (error_body kinds)
    message: str
    path: str          # what to record (without any key)


def _recorded(raw_path: str) -> str:
    """The raw path for the record: no query (it may hold a key), bounded length."""
    return raw_path.split("?", 1)[0][:300]


def check_target(method: str, target: str) -> Target | Refused:
    """The route of a request target, or why it is refused (nothing refused goes upstream)."""
    raw_path, _, query = target.partition("?")
    where = _recorded(target)
    if not _SAFE_PATH.match(raw_path) or any(
            set(seg) == {"."} for seg in raw_path.split("/")[1:]):
        return Refused(400, "bad_request", f"a2c driver gateway: the request path {where!r} "
                       "is not a plain path (dot segments, empty segments, %-encoding and "
                       "backslashes are refused)", where)
    path = normalize(raw_path)
    rt = route(path)
    if rt is NO_ROUTE or rt.method != method:
        return Refused(404, "not_served", f"a2c driver gateway: {method} {path} is not "
                       "served (only generation and token counting reach the provider)", path)
    if not _SAFE_QUERY.match(query):
        return Refused(400, "bad_request", "a2c driver gateway: the query string is not plain "
                       "name=value pairs", path)
    allowed = WIRES[rt.wire].query_keys if rt.wire in WIRES else {}
    kept: list[tuple[str, str]] = []
    key: str | None = None
    seen: set[str] = set()
    for part in filter(None, query.split("&")):
        name, _, value = part.partition("=")
        if name in seen:
            return Refused(400, "bad_request", f"a2c driver gateway: query parameter {name!r} "
                           "is given twice", path)
        seen.add(name)
        if name == "key":
            key = value
        elif name in allowed and value in allowed[name]:
            kept.append((name, value))
        else:
            return Refused(400, "bad_request", f"a2c driver gateway: query parameter {name!r} "
                           f"is not accepted on {path}", path)
    forward = path + ("?" + urllib.parse.urlencode(kept) if kept else "")
    return Target(rt, forward, key)


def forward_headers(items) -> dict[str, str]:
    """The agent's headers that may go upstream, a comma-list header a wire holds to a set of
    values reduced to those (the headers of every wire are kept: a scaffold's SDK sends what
    its wire needs)."""
    allowed: dict[str, frozenset[str] | None] = dict.fromkeys(COMMON_HEADERS)
    for wire in WIRES.values():
        allowed.update(wire.headers)
    out: dict[str, str] = {}
    for name, value in items:
        low = name.lower()
        if low not in allowed:
            continue
        values = allowed[low]
        if values is not None:
            value = ",".join(v for v in (p.strip() for p in value.split(",")) if v in values)
            if not value:
                continue
            if low in out:
                value = out[low] + "," + value
        out[low] = value
    return out
