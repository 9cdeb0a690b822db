"""The shipped price table (prices.yaml beside this file) and the cost of one call.

Cost is computed by the gateway from the provider's own usage fields, never taken from the
provider (none of the four wires reports money). The table is data with a source and a checked
date per entry, so a reader of a run can tell which prices it was charged at: the gateway copies
the entry it used into gateway.json at prepare time (`price` there), and a run keeps that price
even after the table is updated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import yaml

from a2c.contracts.parts import Part
from a2c.contracts.records import optional

PRICES_FILE = Path(__file__).with_name("prices.yaml")
FIELDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class Price(Part):
    """One entry of the table, USD per million tokens, with where its numbers come from;
    `model`: the entry's key, set where a run copies it into gateway.json (`price`). A cache
    rate the entry leaves out is charged at the input rate."""

    model: str | None = optional()
    input: float = 0.0
    output: float = 0.0
    cache_read: float | None = optional()
    cache_write: float | None = optional()
    source: str | None = optional()
    checked: str | None = optional()
    snapshots: tuple[str, ...] | None = optional()

    @property
    def cache_read_rate(self) -> float:
        return float(self.input if self.cache_read is None else self.cache_read)

    @property
    def cache_write_rate(self) -> float:
        return float(self.input if self.cache_write is None else self.cache_write)

    def input_rates(self) -> list[float]:
        """Every rate an input token may be charged at (a cache write may cost more)."""
        return [float(r) for r in (self.input, self.cache_write, self.cache_read)
                if r is not None]


@dataclass(frozen=True)
class PriceTable(Part):
    """prices.yaml: the entries, the aliases (another short name -> an entry), the date the
    table was checked."""

    models: dict[str, Price] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    checked: str | None = None

    @classmethod
    def from_dict(cls, data: dict) -> PriceTable:
        plain = super().from_dict(data)
        return cls(models={name: Price.from_dict(entry or {})
                           for name, entry in (plain.models or {}).items()},
                   aliases=dict(plain.aliases or {}), checked=plain.checked)


@lru_cache(maxsize=4)
def load_prices(path: str | None = None) -> PriceTable:
    return PriceTable.from_dict(yaml.safe_load(Path(path or PRICES_FILE).read_text(
        encoding="utf-8")) or {})


def entry_name(model: str, table: PriceTable | None = None) -> str | None:
    """The entry a model id names exactly: the entry itself, an alias or a declared snapshot
    (never by prefix)."""
    table = table or load_prices()
    models = table.models
    name = table.aliases.get(model, model)
    if name in models:
        return name
    return next((k for k, e in models.items() if model in (e.snapshots or ())), None)


def pinned_models(model: str, allow: list[str] | tuple = (),
                  table: PriceTable | None = None) -> list[str]:
    """Every model id a run pinned to `model` may name: it, and for it and each of `allow`
    the entry it names with that entry's aliases and declared snapshots. An explicit list,
    written into gateway.json: a digit suffix or a prefix never widens it."""
    table = table or load_prices()
    out: list[str] = []
    for m in (model, *allow):
        family = [m]
        name = entry_name(m, table)
        if name:
            family += [name, *(table.models[name].snapshots or ()),
                       *(a for a, t in table.aliases.items() if t == name)]
        out += family
    return list(dict.fromkeys(out))


def price_for(model: str | None, table: PriceTable | None = None) -> Price | None:
    """The table entry for `model` (exact, alias, snapshot, then the longest known prefix; a
    vendor prefix such as `anthropic/` or `models/` is dropped first), with `model` set to the
    key."""
    if not model:
        return None
    table = table or load_prices()
    models = table.models
    name = model.rsplit("/", 1)[-1]
    name = entry_name(name, table) or name
    if name not in models:
        best = max((k for k in models if name.startswith(k + "-") or name.startswith(k + "@")),
                   key=len, default=None)
        if best is None:
            return None
        name = best
    return replace(models[name], model=name)


def cost_usd(price: Price | None, input_tokens: int, output_tokens: int,
             cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float:
    if not price:
        return 0.0
    total = (input_tokens * float(price.input) + output_tokens * float(price.output) +
             cache_read_tokens * price.cache_read_rate +
             cache_write_tokens * price.cache_write_rate)
    return round(total / 1_000_000, 10)
