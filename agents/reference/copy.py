"""Reference "copy" agent: submits the untouched base model.

The grader must score it at the baseline and flag it as a copy of the base model (its weights hash
equals the base model's). A sanity check of the pipeline and of the copy detection.
"""

from __future__ import annotations

import shutil

from a2c.agents.kit import grading
from a2c.agents.kit.context import AgentContext, log


def main(argv: list[str] | None = None) -> int:
    ctx = AgentContext.from_env()
    out = ctx.output_dir / "base-copy"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(ctx.base_model, out, symlinks=False)
    log(f"copied the base model to {out}", event="copy")
    sub = grading.submit(ctx, out, note="untouched base model")
    if sub is None:
        return 1
    reply = grading.wait_score(ctx, sub)
    return 0 if reply.get("status") in ("scored", "invalid") else 1


if __name__ == "__main__":
    from a2c.agents.reference import exit_promptly
    exit_promptly(main())   # no interpreter teardown: gone before the deadline
