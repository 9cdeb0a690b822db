"""The shipped price table (prices.yaml beside this file) and the cost of one call.

Cost is computed by the gateway from the provider's own usage fields, never taken from the
provider (none of the four wires reports money). The table is data with a source and a checked
date per entry, so a reader of a run can tell which prices it was charged at: the gateway copies
the entry it used into gateway.json at prepare time (`price` there), and a run keeps that price
even after the table is updated.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

PRICES_FILE = Path(__file__).with_name("prices.yaml")
FIELDS = ("input", "output", "cache_read", "cache_write")


@lru_cache(maxsize=4)
def load_prices(path: str | None = None) -> dict[str, Any]:
    data = yaml.safe_load(Path(path or PRICES_FILE).read_text(encoding="utf-8"))
    return {"models": data.get("models") or {}, "aliases": data.get("aliases") or {},
            "checked": data.get("checked")}


def entry_name(model: str, table: dict[str, Any] | None = None) -> str | None:
    """The entry a model id names exactly: the entry itself, an alias or a declared snapshot
    (never by prefix)."""
    table = table or load_prices()
    models = table["models"]
    name = table["aliases"].get(model, model)
    if name in models:
        return name
    return next((k for k, e in models.items() if model in (e.get("snapshots") or [])), None)


def pinned_models(model: str, allow: list[str] | tuple = (),
                  table: dict[str, Any] | None = None) -> list[str]:
    """Every model id a run pinned to `model` may name: it, and for it and each of `allow`
    the entry it names with that entry's aliases and declared snapshots. An explicit list,
    written into gateway.json: a digit suffix or a prefix never widens it."""
    table = table or load_prices()
    out: list[str] = []
    for m in (model, *allow):
        family = [m]
        name = entry_name(m, table)
        if name:
            family += [name, *(table["models"][name].get("snapshots") or []),
                       *(a for a, t in table["aliases"].items() if t == name)]
        out += family
    return list(dict.fromkeys(out))


def price_for(model: str | None, table: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The table entry for `model` (exact, alias, snapshot, then the longest known prefix; a
    vendor prefix such as `anthropic/` or `models/` is dropped first), with `model` set to the
    key."""
    if not model:
        return None
    table = table or load_prices()
    models = table["models"]
    name = model.rsplit("/", 1)[-1]
    name = entry_name(name, table) or name
    if name not in models:
        best = max((k for k in models if name.startswith(k + "-") or name.startswith(k + "@")),
                   key=len, default=None)
        if best is None:
            return None
        name = best
    return {"model": name, **models[name]}


def cost_usd(price: dict[str, Any] | None, input_tokens: int, output_tokens: int,
             cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float:
    if not price:
        return 0.0
    total = (input_tokens * float(price.get("input", 0)) +
             output_tokens * float(price.get("output", 0)) +
             cache_read_tokens * float(price.get("cache_read", price.get("input", 0))) +
             cache_write_tokens * float(price.get("cache_write", price.get("input", 0))))
    return round(total / 1_000_000, 10)
