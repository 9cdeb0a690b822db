"""One normalized view of a request, whatever its wire: the model turns already played, what
came back after each, the tools offered, and the prompt text (`a2c.wires.Conversation`, read by
each wire's module in the wire package).

The driver keeps no state between requests: the script position is computed from this view
alone, so a scaffold that retries, forks a sub-conversation or restarts gets the same reply to
the same request.
"""

from __future__ import annotations

from a2c.wires import WIRES, Conversation


def read(wire: str, body: dict, model: str = "", stream: bool = False) -> Conversation:
    """The conversation in a request body of `wire` (for gemini the model and streaming come
    from the path)."""
    if wire not in WIRES:
        raise ValueError(f"unknown wire {wire!r}")
    return WIRES[wire].conversation(body, model, stream)
