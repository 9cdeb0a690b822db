"""Held-out seeds the spec does not give away.

A generated task names its generator, params and seed in the spec, which the agent can read; with
them it could regenerate the held-out items exactly. So the held-out split of a generator that
supports it is drawn from a derived seed:

    heldout_seed(source) = int(HMAC-SHA256(installation key, canonical {generator, params, seed}))

The installation key is 32 random bytes in `$A2C_CACHE/secrets/data.key` (0600 in a 0700 folder,
created on first use; the agent's sandbox never shows the cache). Same installation and spec give
the same held-out items (baselines cache); another installation, or an agent with only the spec,
gets different ones. The agent's split still comes from the spec's seed, unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from typing import TYPE_CHECKING

from a2c.canonical import canonical_json
from a2c.fsutil import KeyFile
from a2c.paths import cache_dir

if TYPE_CHECKING:
    from .source import DataSource

KEY_BYTES = 32


def key_path() -> Path:
    return cache_dir() / "secrets" / "data.key"


def installation_key(path: Path | None = None) -> bytes:
    """The per-installation data key, created (0600 in a 0700 folder, whole) on first use; a key
    file others may read is refused (`KeyFile`)."""
    key = KeyFile(Path(path) if path is not None else key_path(), "the data key",
                  nofollow=True).read_or_create(lambda: os.urandom(KEY_BYTES))
    if len(key) < KEY_BYTES:
        raise OSError(f"{path or key_path()}: data key is {len(key)} bytes, expected {KEY_BYTES}; "
                      "remove it to create a new one (held-out items of generated tasks will "
                      "change)")
    return key


def heldout_seed(source: DataSource, key: bytes | None = None) -> int:
    """The seed of a generator source's held-out split (see the module doc)."""
    key = installation_key() if key is None else key
    msg = canonical_json(source.identity())
    return int.from_bytes(hmac.new(key, msg, hashlib.sha256).digest()[:8], "big")


def seed_tag(seed: int) -> str:
    """A short, non-reversible tag of a derived seed for cache folder names."""
    return hashlib.sha256(f"a2c-heldout-seed:{seed}".encode()).hexdigest()[:12]
