"""A generation call's worst case, and the body the gateway forwards for it.

Admission (issues 23, 32) reserves what a call could cost before it goes upstream, on the one
strict reading of the request (a2c.wires.strict; `Wire.read_request`): the input (a bound no
text can beat, `input_estimate`) plus its output cap (`max_tokens` or the wire's equivalent,
times the candidates it asks for). The ledger lowers the cap to what the budget has left;
`apply_cap` writes that cap into the request, so the provider cannot generate past it, and the
stream usage of an OpenAI Chat stream is turned on (`ask_stream_usage`; the other three wires
report usage in-stream by themselves). What goes upstream is `encode` of that object, the
gateway's own serialization, never the agent's bytes. When a call ends, the ledger replaces the
reservation by the metered usage; a call whose usage never arrived, or that was cut (the run's
end, a disconnect, a broken stream), is charged at least its reservation (`Reservation.charge`).

The input bound. Every tokenizer the providers use maps text to tokens of at least one byte of
its UTF-8 form (byte-level BPE: GPT, Llama, Qwen, Claude; SentencePiece with byte fallback:
Gemini), so a request's text cannot be more tokens than its UTF-8 bytes, and the compact JSON
the gateway forwards holds every string at least at its UTF-8 length (escapes only add). The
estimate is that length, plus ADDED_TOKENS for what the provider adds around it (the chat
template's role markers are fewer tokens than the JSON syntax of a message; the tool-use
preamble is a fixed few hundred: Anthropic documents 346 for Claude 4) and for the fields the
gateway adds. Media are not text: their data bytes are taken out and each inline part is
reserved by kind instead (IMAGE_TOKENS for an image, whatever its bytes: every provider scales
images down to a bounded size; LONG_MEDIA_TOKENS for a document, audio or video, whose tokens
no byte count bounds: a compressed PDF page of text, a minute of low-bitrate audio). Media named
by URL or file id are refused (`Wire.read_request`). Honest English or code is 3-4 bytes a token,
so the bound is 3-4 times the input it holds; where it does not fit a budget, the provider's
counting route is asked and the call admitted on its count (`admit`, `counted_estimate`; not on
OpenAI Chat, which has none). benchmarks/bench_reservation.py measures both.

DEFAULT_OUTPUT_CAP is the cap of a request that names none (OpenAI and Gemini default to the
model's maximum); it is written into the forwarded body only when a token or cost budget
needs a bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from a2c.wires import WIRES, Usage
from a2c.wires.base import Reading
from a2c.wires.strict import encode

__all__ = ["ADDED_TOKENS", "DEFAULT_OUTPUT_CAP", "IMAGE_TOKENS", "LONG_MEDIA_TOKENS",
           "Reading", "Reservation", "admit", "apply_cap", "counted_estimate", "encode",
           "input_estimate", "output_cap", "read_request"]

DEFAULT_OUTPUT_CAP = 32768
ADDED_TOKENS = 1024
IMAGE_TOKENS = 8192
"""An inline image part, whatever its bytes: Anthropic bills at most about 1,600 tokens an image
(about 4,800 at the newest models' high resolution), OpenAI at most about 3,800 (its smallest
models' patch multiplier), Gemini 258 a 768-px tile of an image scaled to at most 3072 px (16
tiles, 4,128)."""
LONG_MEDIA_TOKENS = 1_048_576
"""An inline document, audio or video part: its tokens are bounded by the model's context
window only (the largest of the priced models': Gemini 2.5's 1,048,576)."""


def input_estimate(forwarded: bytes, reading: Reading | None = None) -> int:
    """Input tokens a request may be billed, at most: its forwarded JSON's UTF-8 bytes (media
    data taken out), a fixed allowance per inline media part, and ADDED_TOKENS. What is charged
    is the provider's own count; this holds the budget until it arrives."""
    est = len(forwarded) + ADDED_TOKENS
    if reading is not None:
        est += (reading.images * IMAGE_TOKENS + reading.long_media * LONG_MEDIA_TOKENS -
                reading.media_bytes)
    return est


def read_request(wire: str, body: dict) -> Reading:
    """The request's cost fields read strictly (a2c.wires.strict.Unreadable when refused)."""
    return WIRES[wire].read_request(body)


def output_cap(wire: str, body: dict) -> tuple[int | None, int]:
    """(the request's own output cap or None, the number of candidates it asks for)."""
    return WIRES[wire].output_cap(body)


@dataclass
class Reservation:
    """What the ledger holds for one admitted call until it ends."""

    input_tokens: int          # the estimate
    output_cap: int            # per candidate, as forwarded
    candidates: int = 1
    cost_usd: float = 0.0      # reserved against a cost budget
    released: bool = False
    lowered: dict | None = None   # the cap lowered for the served model's context (context.py)

    @property
    def output_tokens(self) -> int:
        return self.output_cap * self.candidates

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def charged(self) -> Usage:
        """The usage charged when the provider reported none: the whole reservation."""
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)

    def charge(self, seen: Usage) -> Usage:
        """What a call is charged when its usage did not arrive whole (a stream cut short, the
        run's end, a disconnect before the answer, no usage in the answer): at least the
        reservation, more where the provider already reported more. The input is the larger of
        the estimate and the provider's count (its cached part kept apart), the output the
        larger of the cap and what was reported."""
        if not seen.seen:
            out = self.charged()
            out.model = seen.model
            return out
        cached = seen.cache_read_tokens + seen.cache_write_tokens
        return Usage(input_tokens=max(seen.input_tokens, self.input_tokens - cached),
                     output_tokens=max(seen.output_tokens, self.output_tokens),
                     cache_read_tokens=seen.cache_read_tokens,
                     cache_write_tokens=seen.cache_write_tokens, model=seen.model, seen=True)


def apply_cap(wire: str, body: dict, cap: int, requested: int | None, bounded: bool) -> bool:
    """Write the granted output cap into the request; whether the body changed. It is written
    when lower than the request's own, when the request names more than one cap field (so
    every field reads the one cap reserved), or when the request names none and a budget needs
    the bound (`bounded`)."""
    w = WIRES[wire]
    if requested is None:
        if not bounded:
            return False
    elif cap >= requested and not w.cap_fields_differ(body):
        return False
    w.set_output_cap(body, cap)
    return True


def counted_estimate(count: int, bound: int) -> int:
    """The input reserved on the provider's own count: the count with 5% and ADDED_TOKENS of
    room (a counting route is documented as an estimate), never more than the bound."""
    return min(bound, count + count // 20 + ADDED_TOKENS)


def admit(ledger, wire: str, body: dict, reading: Reading, stream: bool, wait_s: float,
          bounded: bool, count: Callable[[], int | None] | None = None,
          context: Callable[[bytes, int, int], tuple[int, int, int | None]] | None = None
          ) -> tuple[Reservation, bytes] | str | None:
    """Admit a generation call on its reading: (the reservation, the bytes to forward), the
    message of a budget refusal, or None when the gateway is stopping. The stream usage is
    asked for before the input is bounded (the bound is on what goes upstream); the granted
    cap is written after. When the bound does not fit a token or cost budget, `count` (the
    provider's counting route, where the wire has one) is asked for the input's real size and
    the call admitted on that if it fits: honest text is 3-4 bytes a token, so the bound alone
    would refuse the last calls of a budget they fit in. `context` (a served model that
    reports its context window: context.py) gives (the context, the largest cap it holds for
    this input, the input estimate): the cap is never more."""
    if stream:
        WIRES[wire].ask_stream_usage(body)
    forward = encode(body)
    bound = input_estimate(forward, reading)
    cap = reading.cap or DEFAULT_OUTPUT_CAP
    lowered = None
    if context is not None:
        window, limit, estimate = context(forward, bound, cap)
        if limit < cap:
            cap = limit
            if reading.cap is not None or bounded:   # a cap is forwarded: the record says so
                lowered = {"requested": reading.cap, "forwarded": limit, "context": window,
                           "input_estimate": estimate,
                           "why": "the served model's context holds no more output after "
                                  "the input" if estimate is not None else
                                  "above the served model's context"}
    got = ledger.admit(bound, cap, reading.candidates, wait_s=wait_s)
    if isinstance(got, tuple) and got[0] != "calls" and count is not None and \
            ledger.could_fit(ADDED_TOKENS, reading.candidates):
        # (a spent budget is not counted for: nothing of a refused call goes upstream then)
        counted = count()
        if counted is not None and counted_estimate(counted, bound) < bound:
            got = ledger.admit(counted_estimate(counted, bound), cap, reading.candidates,
                               wait_s=wait_s)
    if got is None:
        return None
    if not isinstance(got, Reservation):
        limit, cap, used = got
        ledger.exhausted(limit, cap, used)
        return (f"a2c driver gateway: the run's driver {limit} budget is spent ({used:g} of "
                f"{cap:g}, with the calls in flight and this call's input); no further model "
                "calls in this run")
    if lowered is not None:
        lowered["forwarded"] = got.output_cap    # (the budget may have lowered it further)
        got.lowered = lowered
    if apply_cap(wire, body, got.output_cap, reading.cap, bounded):
        forward = encode(body)
    return got, forward


def forward_body(wire: str, body: dict, stream: bool, cap: int, requested: int | None,
                 bounded: bool) -> dict | None:
    """The body to forward with its stream usage asked for and the cap written (None when
    nothing changed). The gateway itself forwards `encode(body)` in every case."""
    changed = stream and WIRES[wire].ask_stream_usage(body)
    changed = apply_cap(wire, body, cap, requested, bounded) or changed
    return body if changed else None
