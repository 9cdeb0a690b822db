"""One reading of a request body (issue 32): a strict JSON parse, and the one serialization of
what was read.

A body a lenient reader could read two ways is refused, never guessed at: a key given twice in
one object (Python keeps the last, other parsers the first: `"model"` twice sends a sibling model
past the model check), `NaN` / `Infinity` and numbers out of a double's range (not JSON; some
parsers take them), text that is not UTF-8, nesting too deep to read. What the gateway admits
it forwards as `encode(obj)`, its own serialization of exactly the object it checked (its
rewrites included), never the agent's bytes.

`int_field` and `one_of` check the fields that change what a call may cost (caps, counts, tiers)
against one reading too: a count must be a JSON integer (`8.0`, `"8"` and `true` are refused,
not read as 8 or 1 or "absent") inside its range.

Standard library only (the bottom layer).
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_CAP = 2**31 - 1
"""The largest output cap a request may name (a 32-bit integer, what every provider's schema
types these fields as)."""


class Unreadable(ValueError):
    """A body (or a field of it) without exactly one reading; the message says what and is
    sent to the agent in the wire's own 400."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise Unreadable(f"the key {key!r} appears twice in one JSON object; a "
                                 "provider could read either value")
            seen.add(key)
    return obj


def _constant(name: str) -> Any:
    raise Unreadable(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Unreadable(f"the number {text[:40]} is out of range")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_constant=_constant,
                            parse_float=_float)


def read(body: bytes) -> Any:
    """The one reading of a JSON body; Unreadable when it has none or more than one."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"the request body is not UTF-8 (byte {exc.start})") from None
    try:
        return _DECODER.decode(text)
    except Unreadable:
        raise
    except RecursionError:
        raise Unreadable("the request body is nested too deeply") from None
    except ValueError as exc:     # JSONDecodeError, an integer of more than 4300 digits
        raise Unreadable(f"the request body is not JSON ({exc})") from None


def encode(obj: Any) -> bytes:
    """The gateway's serialization of what it read: compact UTF-8 JSON. A string holding a lone
    UTF-16 surrogate (valid as a JSON escape, not as UTF-8) is written with ASCII escapes, which
    read back to the same object."""
    try:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int_field(obj: Any, key: str, name: str, lo: int, hi: int = MAX_CAP) -> int | None:
    """obj[key] as an int in [lo, hi]; None when absent or null; Unreadable otherwise (a float,
    even 10.0, a string, a bool, or out of range), naming the field as `name`."""
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None:
        return None
    if not is_int(value):
        raise Unreadable(f"{name} must be a JSON integer, not {json.dumps(value)[:40]}")
    if not lo <= value <= hi:
        raise Unreadable(f"{name} must be between {lo} and {hi}, not {value}")
    return value


def bool_field(obj: Any, key: str, name: str) -> bool | None:
    """obj[key] as a bool (None when absent or null); Unreadable for anything else ("true",
    1): a lenient server would stream what the gateway read as a plain answer."""
    if not isinstance(obj, dict):
        return None
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise Unreadable(f"{name} must be true or false, not {json.dumps(value)[:40]}")


def one_of(obj: Any, key: str, name: str, allowed: tuple, why: str) -> None:
    """Refuse obj[key] unless absent, null or one of `allowed`; `why` ends the message."""
    if not isinstance(obj, dict):
        return
    value = obj.get(key)
    if value is None or (isinstance(value, str) and value in allowed):
        return
    raise Unreadable(f"{name} {json.dumps(value)[:40]} is refused: {why}")


def absent(obj: Any, key: str, name: str, why: str) -> None:
    """Refuse obj[key] unless absent, null, false or empty."""
    if isinstance(obj, dict) and obj.get(key) not in (None, False, "", [], {}):
        raise Unreadable(f"{name} is refused: {why}")
