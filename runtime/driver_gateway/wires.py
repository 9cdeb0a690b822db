"""The gateway's names for what it reads of a wire, all kept in the wire package `a2c.wires`
(shared with the analysis and the scripted driver): the streaming flag of a request, the usage
in a passing answer (`UsageMeter`), and the provider's own error bodies for the answers the
gateway gives itself (shapes copied from each provider, so a scaffold shows its normal message
and takes its normal branch: retry on 5xx/timeout, stop on out-of-credit)."""

from __future__ import annotations

from a2c.wires import BUDGET_STATUS, WIRES, Route, error_body  # noqa: F401 - re-exported
from a2c.wires.reading import UsageMeter  # noqa: F401 - re-exported


def request_streams(rt: Route, body: dict | None, query: str) -> bool:
    """Whether a request asks for a stream (Gemini: by its path; the others: `stream: true`)."""
    wire = WIRES.get(rt.wire or "") or WIRES["openai-chat"]
    return wire.request_streams(rt, body)
