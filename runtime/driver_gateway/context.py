"""The served model's context window, and the output cap it can hold.

A vLLM server refuses (400) a call whose input plus `max_tokens` passes the model's context
(`max_model_len`), whatever the budget says: the red team's Claude Code asked for 32,000 output
tokens, the gateway lowered that to what the budget left (16,143), still above SmolLM2's 8,192,
and every call of the run was refused. So a gateway whose upstream reports its context (vLLM's
GET /v1/models carries `max_model_len` per model: a `vllm/` driver a2c serves, or a `local/`
server the user runs) lowers every cap it forwards to what the context leaves after the input:

- a call whose wire has a token-counting route the server serves is counted there, exactly:
  an Anthropic Messages call by vLLM's POST /v1/messages/count_tokens (the same conversion and
  chat template as the call itself; the wire's own `count_request`), no margin;
- a Chat Completions call is counted exactly too: vLLM's POST /tokenize takes the request's own
  `messages` and `tools` and renders them with the chat template the call will be rendered
  with, so the count is the prompt the server will see (no margin);
- any other input (a Responses call: vLLM serves no counting route for it; a server without
  those routes) is counted by the server's tokenizer on the compact JSON the gateway forwards,
  plus CONTEXT_MARGIN for the chat template's role markers and tool preamble. The JSON holds
  every string of the request (escapes and keys only add tokens), so the count is at least the
  prompt's in practice (Claude Code's first request: 14,402 counted as JSON, 5,873 served); it
  is an estimate, and a call it underestimates still gets the server's own refusal;
- where the server has no /tokenize, the cap is lowered to the context itself (a cap no model
  call can pass), not below.

The event of a call whose cap was lowered for the context says so (`cap_lowered`).
"""

from __future__ import annotations

import http.client
import json
from typing import Any

from .upstream import Upstream

CONTEXT_MARGIN = 128
PROBE_TIMEOUT_S = 5.0


def _ask(upstream: Upstream, method: str, path: str, body: bytes | None,
         key: str | None) -> Any:
    """The JSON of a 200 answer from the upstream, None for anything else."""
    headers = {"Host": f"{upstream.host}:{upstream.port}", "Accept-Encoding": "identity",
               "Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if body is not None:
        headers["Content-Length"] = str(len(body))
    cls = http.client.HTTPSConnection if upstream.https else http.client.HTTPConnection
    conn = cls(upstream.host, upstream.port, timeout=PROBE_TIMEOUT_S)
    try:
        conn.request(method, upstream.path_for(path), body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return json.loads(data) if resp.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()


def served_context(upstream: Upstream, model: str, key: str | None = None) -> int | None:
    """The served model's context length from GET /v1/models (`max_model_len` of the card
    whose id is the model, or of the only card); None when the server does not say."""
    data = _ask(upstream, "GET", "/v1/models", None, key)
    cards = [c for c in (data or {}).get("data") or [] if isinstance(c, dict)] \
        if isinstance(data, dict) else []
    card = next((c for c in cards if c.get("id") == model), cards[0] if len(cards) == 1
                else None)
    value = (card or {}).get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


CHAT_WIRE = "openai-chat"     # the wire whose request /tokenize renders as the server will


def _count(data: Any) -> int | None:
    count = (data or {}).get("count") if isinstance(data, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def count_chat(upstream: Upstream, model: str, forward: bytes,
               key: str | None = None) -> int | None:
    """The prompt's exact length: the request's messages and tools rendered by the server's
    chat template (POST /tokenize, chat form); None when the body or the server does not
    allow it."""
    try:
        body = json.loads(forward)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    ask = {"model": model, "messages": body["messages"], "add_generation_prompt": True}
    for field in ("tools", "chat_template_kwargs"):
        if body.get(field):
            ask[field] = body[field]
    return _count(_ask(upstream, "POST", "/tokenize", json.dumps(ask).encode(), key))


def count_by_route(upstream: Upstream, wire: str, forward: bytes, path: str,
                   key: str | None = None) -> int | None:
    """The input's exact count from the wire's own counting route (a2c.wires `count_request`:
    Anthropic's /v1/messages/count_tokens, which vLLM serves); None without one, or when the
    server does not answer it."""
    from a2c.wires import WIRES
    spoken = WIRES.get(wire)
    try:
        body = json.loads(forward)
    except ValueError:
        return None
    asked = spoken.count_request(body, path) if spoken and isinstance(body, dict) else None
    if asked is None:
        return None
    target, data = asked
    return spoken.count_of(_ask(upstream, "POST", target, json.dumps(data).encode(), key))


def count_input(upstream: Upstream, model: str, forward: bytes,
                key: str | None = None) -> int | None:
    """The server's token count of the forwarded JSON (POST /tokenize), None without one."""
    body = json.dumps({"model": model, "prompt": forward.decode("utf-8", "replace"),
                       "add_special_tokens": False}).encode()
    return _count(_ask(upstream, "POST", "/tokenize", body, key))


def cap_limit(context: int, counted: int | None,
              margin: int = CONTEXT_MARGIN) -> tuple[int, int | None]:
    """(the largest output cap the context holds for this input, the input estimate used):
    the context less the counted input and `margin`, at least 1; the context itself when the
    input could not be counted."""
    if counted is None:
        return context, None
    estimate = counted + margin
    return max(1, context - estimate), estimate


def context_room(upstream: Upstream, model: str, context: int, forward: bytes,
                 key: str | None = None, wire: str | None = None,
                 path: str = "") -> tuple[int, int, int | None]:
    """(the served context, the largest cap it holds after this input, the estimate): what
    admission lowers a cap to (admission.admit's `context`). Counted exactly where the server
    can (the wire's counting route; the chat form of /tokenize), else as its JSON."""
    exact = count_by_route(upstream, wire, forward, path, key) if wire else None
    if exact is None and wire == CHAT_WIRE:
        exact = count_chat(upstream, model, forward, key)
    if exact is not None:
        return (context, *cap_limit(context, exact, margin=0))
    limit, estimate = cap_limit(context, count_input(upstream, model, forward, key))
    return context, limit, estimate
