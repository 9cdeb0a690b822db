"""The record keys themselves: an Ed25519 public key that checks an event's `sig`, the
operator's private key that writes it, and a legacy HMAC key that checks the `mac` of a record
written before the signatures; each named by its key id.

Kept apart from where the operator's key files live (a2c.contracts.record_key): checking a
record needs only these classes and a key's bytes, never the operator's configuration.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from a2c.errors import A2CError

PUBLIC_SUFFIX = ".pub"
ED25519 = "ed25519"
LEGACY_HMAC = "hmac-sha256"


class RecordKeyError(A2CError):
    """A record key file is unusable (unreadable, malformed, readable by others)."""


def key_id(material: bytes) -> str:
    """The id of a key: the first 16 hex digits of sha256 of the raw public key (Ed25519) or of
    the secret (a legacy HMAC key, whose id is never the secret itself)."""
    return hashlib.sha256(material).hexdigest()[:16]


# ----------------------------------------------------------------------------- keys
@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key: checks `sig` of events written under its id."""

    raw: bytes
    path: Path | None = None
    scheme: str = field(default=ED25519, init=False)
    field_name: str = field(default="sig", init=False)

    @property
    def id(self) -> str:
        return key_id(self.raw)

    def check(self, event_hash: str, sig: object) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        if not isinstance(sig, str) or len(sig) != 128:
            return False
        try:
            signature = bytes.fromhex(sig)
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature,
                                                                event_hash.encode("ascii"))
        except (ValueError, InvalidSignature, UnicodeEncodeError):
            return False
        return True

    def pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        return Ed25519PublicKey.from_public_bytes(self.raw).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def __repr__(self) -> str:
        return f"PublicKey(id={self.id}, path={self.path})"


@dataclass(frozen=True)
class SigningKey:
    """The operator's Ed25519 private key: signs each event's hash. Its id is its public key's."""

    private: Any = field(repr=False)          # cryptography's Ed25519PrivateKey
    path: Path | None = None

    @property
    def public(self) -> PublicKey:
        from cryptography.hazmat.primitives import serialization
        raw = self.private.public_key().public_bytes(serialization.Encoding.Raw,
                                                     serialization.PublicFormat.Raw)
        return PublicKey(raw, self.path.with_name(self.path.name + PUBLIC_SUFFIX) if self.path
                         else None)

    @property
    def id(self) -> str:
        return self.public.id

    def sign(self, event_hash: str) -> str:
        return self.private.sign(event_hash.encode("ascii")).hex()

    def __repr__(self) -> str:   # never print the private key
        return f"SigningKey(id={self.id}, path={self.path})"


@dataclass(frozen=True)
class LegacyHmacKey:
    """A legacy record key (HMAC-SHA256): checks `mac` of events written before the signatures."""

    secret: bytes = field(repr=False)
    path: Path | None = None
    scheme: str = field(default=LEGACY_HMAC, init=False)
    field_name: str = field(default="mac", init=False)

    @property
    def id(self) -> str:
        return key_id(self.secret)

    def mac(self, event_hash: str) -> str:
        return hmac.new(self.secret, event_hash.encode("ascii"), hashlib.sha256).hexdigest()

    def check(self, event_hash: str, mac: object) -> bool:
        return isinstance(mac, str) and hmac.compare_digest(self.mac(event_hash), mac)

    def __repr__(self) -> str:   # never print the secret
        return f"LegacyHmacKey(id={self.id}, path={self.path})"


Verifier = Union[PublicKey, LegacyHmacKey]


def parse_public_key(data: bytes, path: Path | None = None) -> PublicKey:
    """An Ed25519 public key from PEM (SubjectPublicKeyInfo), OpenSSH (`ssh-ed25519 ...`) or 64
    hex digits."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    where = f"{path}: " if path else ""
    text = data.strip()
    loaded = None
    try:
        if text.startswith(b"-----BEGIN"):
            loaded = serialization.load_pem_public_key(text)
        elif text.startswith(b"ssh-ed25519 "):
            loaded = serialization.load_ssh_public_key(text)
        else:
            raw = bytes.fromhex(text.decode("ascii"))
            if len(raw) != 32:
                raise ValueError(f"{len(raw)} bytes, expected 32")
            loaded = Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise RecordKeyError(f"{where}not an Ed25519 public key (PEM, OpenSSH or 64 hex "
                             f"digits): {exc}") from exc
    if not isinstance(loaded, Ed25519PublicKey):
        raise RecordKeyError(f"{where}not an Ed25519 public key")
    raw = loaded.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PublicKey(raw, path)


def verifiers(keys: Verifier | SigningKey | Iterable[Verifier | SigningKey] | None
              ) -> list[Verifier]:
    """A list of verifiers from one key, several or none (a signing key gives its public key)."""
    if keys is None:
        return []
    if isinstance(keys, (PublicKey, LegacyHmacKey, SigningKey)):
        keys = [keys]
    return [k.public if isinstance(k, SigningKey) else k for k in keys]
