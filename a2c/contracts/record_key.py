"""The operator's record key: what authenticates a run's event chain.

Each event of `events.jsonl` carries `key` (the key id) and `mac`, an HMAC-SHA256 of its hash under
this key; since each hash covers the previous one, a valid `mac` on an event authenticates the
whole chain up to it. The key is 32 random bytes in a file of the operator's configuration
(`a2c.paths.record_key_file()`: `$A2C_RECORD_KEY_FILE`, else `~/.config/a2c/record.key`), created
0600 on first use. It never enters a run directory, a bundle or the sandbox, so neither the agent
nor anyone who edits a record later can re-chain it: `a2c verify` recomputes every `mac`.

The key id (`key_id`) is the first 16 hex digits of sha256(key): it names the key a record needs
without revealing it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from a2c.errors import A2CError

KEY_BYTES = 32


class RecordKeyError(A2CError):
    """The record key file is unusable (unreadable, malformed, readable by others)."""


@dataclass(frozen=True)
class RecordKey:
    secret: bytes
    path: Path | None = None

    @property
    def id(self) -> str:
        return key_id(self.secret)

    def mac(self, event_hash: str) -> str:
        return hmac.new(self.secret, event_hash.encode("ascii"), hashlib.sha256).hexdigest()

    def check(self, event_hash: str, mac: object) -> bool:
        return isinstance(mac, str) and hmac.compare_digest(self.mac(event_hash), mac)

    def __repr__(self) -> str:   # never print the secret
        return f"RecordKey(id={self.id}, path={self.path})"


def key_id(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()[:16]


def key_file() -> Path:
    from a2c.paths import record_key_file
    return record_key_file()


def _read(path: Path) -> RecordKey:
    try:
        st = path.stat()
        data = path.read_bytes()
    except OSError as exc:
        raise RecordKeyError(f"{path}: cannot read the record key: {exc}") from exc
    if st.st_mode & 0o077:
        raise RecordKeyError(f"{path}: the record key is readable or writable by others "
                             f"(mode {st.st_mode & 0o777:o}); chmod 600 it")
    secret = data.strip()
    try:
        secret = bytes.fromhex(secret.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordKeyError(f"{path}: not a record key (expected {KEY_BYTES * 2} hex "
                             "digits)") from exc
    if len(secret) < 16:
        raise RecordKeyError(f"{path}: the record key is too short ({len(secret)} bytes)")
    return RecordKey(secret, path)


def load_key(path: str | Path | None = None) -> RecordKey | None:
    """The key in `path` (default: the operator's key file); None when that file is missing."""
    path = Path(path) if path is not None else key_file()
    if not path.exists():
        return None
    return _read(path)


def operator_key(path: str | Path | None = None) -> RecordKey:
    """The operator's key, created (0600, parent folder 0700) on first use."""
    path = Path(path) if path is not None else key_file()
    key = load_key(path)
    if key is not None:
        return key
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = secrets.token_bytes(KEY_BYTES).hex().encode("ascii") + b"\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:      # another process created it first: use theirs
        return _read(path)
    try:
        os.write(fd, text)
        os.fsync(fd)
    finally:
        os.close(fd)
    return _read(path)
