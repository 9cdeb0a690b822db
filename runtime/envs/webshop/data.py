"""The `webshop` data generator: records naming WebShop sessions (goal indices) per split."""

from __future__ import annotations

from pathlib import Path


def sessions(params: dict, seed: int, out_dir: Path) -> dict:
    """Records naming WebShop sessions: `{"id": "fixed_<i>", "session": "fixed_<i>", "prompt": ""}`.

    Params: `splits: {name: [start, stop]}` ranges of WebShop goal indices. Default: `test`
    = goals 0-99 (the first 100 of WebShop's test goals, 0-499), `train` = goals 1500-2999 (from
    WebShop's training goals, 1500+). The instruction text comes from the server at reset.
    """
    splits = params.get("splits") or {"train": [1500, 3000], "test": [0, 100]}
    out = {}
    for name, (start, stop) in splits.items():
        out[name] = [{"id": f"fixed_{i}", "session": f"fixed_{i}", "prompt": "", "answer": ""}
                     for i in range(int(start), int(stop))]
    return out
