"""One usage record for every wire and every area: what the gateway meters from a provider's
answer, what a driver script says a turn costs, what the scripted driver writes back into each
wire's own usage fields.

Normalised: `input_tokens` are the uncached input tokens; cached reads and cache writes are
counted apart (each provider prices them apart); `output_tokens` include reasoning ("thinking")
tokens, which every provider bills as output. Each wire module reads its native fields into this
record (`Wire.read_usage`) and writes them from it (`Wire.usage_fields`).
"""

from __future__ import annotations

from dataclasses import dataclass

_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens")


@dataclass
class Usage:
    """Token counts of one answer. `model` is the model the answer names; `seen` says whether
    any usage field was read at all (a stream cut before its usage event has none)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None
    seen: bool = False

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + \
            self.cache_write_tokens

    @classmethod
    def of(cls, data: dict | None, default: Usage | None = None) -> Usage:
        """A script's `usage:` mapping (input_tokens, output_tokens, cache_read_tokens);
        `default` (or nothing) where the mapping is absent."""
        if data is None:
            return default or cls()
        return cls(**{k: int(data.get(k, 0)) for k in _COUNTS})

    def read_openai_counts(self, usage: dict, prompt: str, details: str, output: str) -> None:
        """OpenAI's two wires count the cached part inside the prompt total (`<details>.
        cached_tokens`); here it is counted apart. The field names are the wire's."""
        total = count(usage.get(prompt))
        cached = count((usage.get(details) or {}).get("cached_tokens"))
        self.input_tokens, self.cache_read_tokens = max(total - cached, 0), cached
        self.output_tokens = count(usage.get(output))
        self.seen = True

    def as_dict(self) -> dict:
        """The counts a script can set (cache writes only when there are some)."""
        out = {k: getattr(self, k) for k in _COUNTS}
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        return out


def count(v) -> int:
    """A usage field as an int (0 for anything that is not a number)."""
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
