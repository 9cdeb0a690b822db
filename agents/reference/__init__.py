"""Reference agents: scripted (no LLM) scaffolds that really post-train the base model.

`python -m a2c.agents.reference.sft | grpo | copy`. They run like any scaffold (launched by their
agent bundle's launch.sh inside the sandbox) and use only what any agent gets: the environment
variables, the workspace (`run_meta.json`, the grading client) and the read-only data and model.

How a reference agent ends (`wait_scores`, `exit_promptly`): the runtime stops the agent's tree at
the deadline and records `agent_exited` with the reason `deadline` when it was still running then,
so an agent that has finished must be gone before it. Waiting for a score stops `EXIT_MARGIN_S`
before the deadline (the grader scores a submission after the agent exits as well), and the
process leaves with `os._exit` once its output is flushed: the interpreter's own teardown with
torch, transformers, TRL and datasets loaded took 2.5 s on a loaded 2-core machine (0.3 s
without it), enough to turn a finished agent into one killed by the deadline.
"""

from __future__ import annotations

import os
import sys

EXIT_MARGIN_S = 10.0


def wait_scores(ctx, submitted, margin: float = EXIT_MARGIN_S) -> list[dict]:
    """Wait for each submission's score (the grading client logs it), never later than `margin`
    seconds before the deadline; a score not back by then is left to the grader, which scores
    every accepted submission after the agent exits. Returns the replies."""
    from a2c.agents.kit import grading
    from a2c.agents.kit.context import log
    replies = []
    for sub in submitted:
        left = ctx.remaining() - margin
        if left < 1:
            log(f"submission {sub}: not waiting for its score ({max(0.0, ctx.remaining()):.0f}s "
                "to the deadline; the grader scores it after the agent exits)",
                event="score_not_awaited", submission=sub)
            replies.append({"id": sub, "status": "not_awaited"})
            continue
        reply = grading.wait_score(ctx, sub, timeout=left)
        if reply.get("status") == "timeout":
            log(f"submission {sub}: no score yet, stopped waiting {margin:.0f}s before the "
                "deadline (the grader scores it after the agent exits)",
                event="score_not_awaited", submission=sub)
        replies.append(reply)
    return replies


def exit_promptly(code: int) -> None:
    """End the process now with `code`: stdout and stderr flushed, then `os._exit`, skipping the
    interpreter's teardown (atexit handlers, module and thread clean-up). Only once the agent has
    finished: every file it wrote is closed, its submissions are with the grader."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing more to write
            pass
    os._exit(0 if code is None else code if isinstance(code, int) else 1)
