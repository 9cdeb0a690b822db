"""A generation call's worst case, and the body the gateway forwards for it.

Admission (issue 23) reserves what a call could cost before it goes upstream: the input (an
estimate from the request's size, `input_estimate`) plus its output cap (`max_tokens` or the
wire's equivalent, times the number of candidates asked for). The ledger lowers the cap to what
the budget has left; `forward_body` writes that cap into the request, so the provider cannot
generate past it, and turns on the usage report of an OpenAI Chat stream (the other three wires
report usage in-stream by themselves). When a call ends, the ledger replaces the reservation by
the metered usage; a call whose usage never arrived is charged its reservation (`charged`).

DEFAULT_OUTPUT_CAP is the cap of a request that names none (OpenAI and Gemini default to the
model's maximum); it is written into the forwarded body only when a token or cost budget
needs a bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from a2c.wires import WIRES, Usage, Wire

DEFAULT_OUTPUT_CAP = 32768
BYTES_PER_TOKEN = 4
ADDED_FIELDS_TOKENS = 16


def input_estimate(body: bytes) -> int:
    """Input tokens a request may be billed: its size at ~4 bytes a token (JSON text), plus
    room for the fields the gateway may add (an output cap, stream_options). An estimate for
    the reservation only; what is charged is the provider's own count."""
    return len(body) // BYTES_PER_TOKEN + ADDED_FIELDS_TOKENS


def _wire(name: str) -> Wire:
    return WIRES.get(name) or WIRES["gemini"]


def output_cap(wire: str, body: dict) -> tuple[int | None, int]:
    """(the request's own output cap or None, the number of candidates it asks for): each
    wire names them in its own fields (`Wire.output_cap`)."""
    return _wire(wire).output_cap(body)


@dataclass
class Reservation:
    """What the ledger holds for one admitted call until it ends."""

    input_tokens: int          # the estimate
    output_cap: int            # per candidate, as forwarded
    candidates: int = 1
    cost_usd: float = 0.0      # reserved against a cost budget
    released: bool = False

    @property
    def output_tokens(self) -> int:
        return self.output_cap * self.candidates

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def charged(self) -> Usage:
        """The usage charged when the provider reported none: the whole reservation."""
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)


def forward_body(wire: str, body: dict, stream: bool, cap: int, requested: int | None,
                 bounded: bool) -> dict | None:
    """The body to forward (None: forward the agent's bytes unchanged). `cap` is the output
    cap the ledger granted; it is written when lower than the request's own, or when the
    request names none and a budget needs the bound (`bounded`)."""
    changed = stream and _wire(wire).ask_stream_usage(body)
    if (requested is not None and cap < requested) or (requested is None and bounded):
        _wire(wire).set_output_cap(body, cap)
        changed = True
    return body if changed else None


def encode(body: dict) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
