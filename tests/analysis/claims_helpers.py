"""Held-out items for a fixture run (RUN/grader/heldout.jsonl), so that its contamination check
runs: the record's fact a claim about held-out data is checked against (analysis/claims.py)."""

from __future__ import annotations

import json
from pathlib import Path

PROMPT = ("A farmer keeps {a} goats and buys {b} more at the autumn market in the valley; how "
          "many goats does the farmer keep now? End your reply with '#### ' and the number.")


def heldout_items(n: int = 10) -> list[dict]:
    return [{"id": f"held-{i}", "prompt": PROMPT.format(a=311 + 7 * i, b=45 + 3 * i),
             "answer": str(356 + 10 * i)} for i in range(n)]


def hold_out(run: Path, maker, n: int = 10) -> list[dict]:
    """Write `n` held-out items the agent never saw into the run's grader folder and reseal the
    record (what the runtime's own held-out split looks like)."""
    items = heldout_items(n)
    (run / "grader" / "heldout.jsonl").write_text(
        "".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
    maker.reseal(run)
    return items
