"""The shipped price table: every entry has its four prices, a source URL and a date, and the
models the scaffolds default to are in it."""

from __future__ import annotations

import datetime

import pytest

from a2c.runtime.driver_gateway.prices import FIELDS, cost_usd, load_prices, price_for


def test_every_entry_is_complete_and_sourced():
    table = load_prices()
    assert table.models
    for name, entry in table.models.items():
        for field in FIELDS:
            rate = getattr(entry, field)
            assert isinstance(rate, (int, float)) and rate >= 0, (name, field)
        assert entry.source.startswith("https://"), name
        datetime.date.fromisoformat(entry.checked)
        assert entry.cache_read <= entry.input <= entry.output, name
    for alias, target in table.aliases.items():
        assert target in table.models, alias
    # a declared snapshot belongs to one entry and names no other entry (pinning reads them)
    snaps = [s for e in table.models.values() for s in e.snapshots or ()]
    assert len(snaps) == len(set(snaps)) and not set(snaps) & set(table.models)


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5",
                                   "gpt-5", "gpt-5-codex", "gpt-5-mini", "gemini-2.5-pro",
                                   "gemini-2.5-flash"])
def test_scaffold_defaults_are_priced(model):
    assert price_for(model).model == model


def test_lookup_and_cost():
    assert price_for("claude-sonnet-4-5-20250929").model == "claude-sonnet-4-5"
    assert price_for("anthropic/claude-sonnet-4-5").model == "claude-sonnet-4-5"
    assert price_for("models/gemini-2.5-pro").model == "gemini-2.5-pro"
    assert price_for("gpt-5-codex").model == "gpt-5-codex"      # not the gpt-5 prefix
    assert price_for("Qwen3-8B") is None and price_for(None) is None
    p = price_for("claude-sonnet-4-5")
    # 1M of each kind: 3 + 15 + 0.30 + 3.75
    assert cost_usd(p, 10**6, 10**6, 10**6, 10**6) == pytest.approx(22.05)
    assert cost_usd(None, 10**6, 10**6) == 0.0
