"""The operator's record keys: who signs a run's event chain, and how anyone checks it.

Each event of `events.jsonl` carries `key` (the key id) and `sig`, an Ed25519 signature of its
hash; since each hash covers the previous one, a valid `sig` on an event authenticates the whole
chain up to it. Signing needs the operator's **private** key; checking needs only the **public**
key, so a record can be verified by anyone the public key is given to (publish it beside the
results: `a2c keys --export FILE`), and whoever can verify still cannot re-sign an edited record.

Files (all in the operator's configuration, never in a run directory, a bundle or a sandbox):

- the private key, `signing_key_file()`: `$A2C_RECORD_SIGNING_KEY`, else `record.ed25519` beside
  `$A2C_RECORD_KEY_FILE` when that is set (the older override keeps working), else
  `~/.config/a2c/record.ed25519` (`$XDG_CONFIG_HOME/a2c`). PKCS#8 PEM, created 0600 (folder 0700)
  on first use; a private key file readable or writable by group or others is refused (a
  symlink to the key is followed, and the mode checked is the file's own);
- the public key beside it, `record.ed25519.pub` (SubjectPublicKeyInfo PEM, 0644), written with
  the private key; publishable;
- older public keys kept at a rotation (`a2c keys --rotate`), `record-keys/<id>.pub` in the same
  folder: trusted by default, so records signed before a rotation keep verifying.

The key id (`key_id`) is the first 16 hex digits of sha256 of the raw 32-byte public key.

Legacy records (written before the signatures) carry `mac`, an HMAC-SHA256 of each hash under a
32-byte secret in `a2c.paths.record_key_file()` (`$A2C_RECORD_KEY_FILE`, else
`~/.config/a2c/record.key`). They still verify, but only with that key file given explicitly
(`a2c verify --key-file FILE`), and are said to be "authenticated (legacy HMAC)": anyone holding
that secret could also have forged them.

`record_key_status()` says where the operator's private key is, whether it exists, whether its
file mode is private, and its key id (for `a2c doctor`). The key classes and the parsing of a
key's bytes are a2c.contracts.record_signatures (re-exported here for the writers and readers).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import NamedTuple

from a2c.settings import get_path

from .record_signatures import (
    ED25519,
    LEGACY_HMAC,
    PUBLIC_SUFFIX,
    LegacyHmacKey,
    PublicKey,
    RecordKeyError,
    SigningKey,
    Verifier,
    key_id,
    parse_public_key,
    verifiers,
)

__all__ = ["ED25519", "LEGACY_HMAC", "PUBLIC_SUFFIX", "LegacyHmacKey", "PublicKey",
           "RecordKeyError", "SigningKey", "Verifier", "key_id", "parse_public_key", "verifiers",
           "KEY_BYTES", "SIGNING_KEY_NAME", "TRUSTED_DIR", "signing_key_file", "public_key_file",
           "trusted_keys_dir", "legacy_key_file", "key_file", "private_key_paths",
           "load_signing_key", "load_public_key", "operator_public_keys", "load_legacy_key",
           "load_key", "generate_signing_key", "operator_key", "rotate_operator_key",
           "RecordKeyStatus", "record_key_status"]

KEY_BYTES = 32
SIGNING_KEY_NAME = "record.ed25519"
TRUSTED_DIR = "record-keys"          # older public keys, kept at a rotation


# ----------------------------------------------------------------------------- where
def signing_key_file() -> Path:
    """The operator's private signing key: $A2C_RECORD_SIGNING_KEY, else record.ed25519 beside
    $A2C_RECORD_KEY_FILE (when set), else config_dir()/record.ed25519."""
    env = get_path("A2C_RECORD_SIGNING_KEY")
    if env:
        return env
    legacy = get_path("A2C_RECORD_KEY_FILE")
    if legacy:
        return legacy.parent / SIGNING_KEY_NAME
    from a2c.paths import config_dir
    return config_dir() / SIGNING_KEY_NAME


def public_key_file(private: str | Path | None = None) -> Path:
    """The public key beside a private key file (default: the operator's)."""
    private = Path(private) if private is not None else signing_key_file()
    return private.with_name(private.name + PUBLIC_SUFFIX)


def trusted_keys_dir(private: str | Path | None = None) -> Path:
    """Older public keys of the operator (kept at a rotation), trusted by default."""
    private = Path(private) if private is not None else signing_key_file()
    return private.parent / TRUSTED_DIR


def legacy_key_file() -> Path:
    """Where a legacy HMAC record key was kept ($A2C_RECORD_KEY_FILE, else
    config_dir()/record.key)."""
    from a2c.paths import record_key_file
    return record_key_file()


def key_file() -> Path:
    """The operator's private signing key file (the key that writes records)."""
    return signing_key_file()


def private_key_paths() -> list[Path]:
    """Every file that holds a secret able to authenticate a record (the signing key and a
    legacy HMAC key): what must never be inside a runs folder or a sandbox's view."""
    return [signing_key_file(), legacy_key_file()]


# ----------------------------------------------------------------------------- reading
def _read_private_bytes(path: Path, what: str) -> bytes:
    """The key file's bytes through fsutil.KeyFile (regular file, 0600 or stricter; a symlink,
    such as a mounted Kubernetes Secret, is followed and the file's own mode checked)."""
    from a2c.fsutil import KeyFile, KeyFileError
    try:
        return KeyFile(Path(path), what=f"the {what}").read()
    except KeyFileError as exc:
        raise RecordKeyError(str(exc)) from exc


def _read_signing(path: Path) -> SigningKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    data = _read_private_bytes(path, "record signing key")
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise RecordKeyError(f"{path}: not a record signing key (expected an unencrypted "
                             f"Ed25519 private key in PEM): {exc}") from exc
    if not isinstance(private, Ed25519PrivateKey):
        raise RecordKeyError(f"{path}: not an Ed25519 private key")
    return SigningKey(private, path)


def load_signing_key(path: str | Path | None = None) -> SigningKey | None:
    """The private key in `path` (default: the operator's); None when that file is missing."""
    path = Path(path) if path is not None else signing_key_file()
    if not os.path.lexists(path):
        return None
    return _read_signing(path)


def load_public_key(path: str | Path) -> PublicKey:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecordKeyError(f"{path}: cannot read the public key: {exc}") from exc
    if b"PRIVATE KEY" in data:
        raise RecordKeyError(f"{path}: this is a private key; give the public key "
                             f"({path.name}{PUBLIC_SUFFIX}, or `a2c keys --export FILE`)")
    return parse_public_key(data, path)


def operator_public_keys() -> list[PublicKey]:
    """The public keys a record of this operator is checked with by default: the current one
    (its .pub file, else derived from the private key) and the older ones in record-keys/.
    Never creates a key; a missing key gives an empty list."""
    keys: list[PublicKey] = []
    pub = public_key_file()
    if pub.is_file():
        keys.append(load_public_key(pub))
    else:
        private = load_signing_key()
        if private is not None:
            keys.append(private.public)
    trusted = trusted_keys_dir()
    if trusted.is_dir():
        for path in sorted(trusted.glob(f"*{PUBLIC_SUFFIX}")):
            key = load_public_key(path)
            if all(k.id != key.id for k in keys):
                keys.append(key)
    return keys


def load_legacy_key(path: str | Path | None = None) -> LegacyHmacKey | None:
    """A legacy HMAC key in `path` (default: the legacy key file); None when it is missing."""
    path = Path(path) if path is not None else legacy_key_file()
    if not os.path.lexists(path):
        return None
    data = _read_private_bytes(path, "record key")
    try:
        secret = bytes.fromhex(data.strip().decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordKeyError(f"{path}: not a legacy record key (expected {KEY_BYTES * 2} hex "
                             "digits)") from exc
    if len(secret) < 16:
        raise RecordKeyError(f"{path}: the record key is too short ({len(secret)} bytes)")
    return LegacyHmacKey(secret, path)


def load_key(path: str | Path | None = None) -> SigningKey | None:
    """The operator's signing key (or the one in `path`); None when the file is missing."""
    return load_signing_key(path)


# ----------------------------------------------------------------------------- writing
def _write_new(path: Path, data: bytes, mode: int) -> bool:
    """Create `path` with `data`, whole, or not at all (False: it exists already)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)          # atomic, and fails if the key exists (another writer won)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def _write_public(key: SigningKey) -> None:
    from a2c.fsutil import write_bytes_atomic
    if key.path is not None:
        write_bytes_atomic(public_key_file(key.path), key.public.pem(), mode=0o644)


def generate_signing_key(path: str | Path) -> SigningKey:
    """A new Ed25519 key pair at `path` (private, 0600; folder 0700) and `path`.pub; refuses to
    overwrite an existing key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    if not _write_new(path, pem, 0o600):
        raise RecordKeyError(f"{path}: a record signing key exists already")
    key = SigningKey(private, path)
    _write_public(key)
    return key


def operator_key(path: str | Path | None = None) -> SigningKey:
    """The operator's signing key (or the one at `path`), created with its public key on first
    use."""
    path = Path(path) if path is not None else signing_key_file()
    key = load_signing_key(path)
    if key is not None:
        if not public_key_file(path).exists():
            _write_public(key)
        return key
    try:
        return generate_signing_key(path)
    except RecordKeyError:       # another process created it first: use theirs
        found = load_signing_key(path)
        if found is None:
            raise
        return found


def rotate_operator_key() -> tuple[PublicKey | None, SigningKey]:
    """A new signing key: the current public key moves to record-keys/<id>.pub (still trusted, so
    older records verify), the current private key is deleted, a new pair is made."""
    from a2c.fsutil import write_bytes_atomic
    path = signing_key_file()
    old = load_signing_key(path)
    old_public = None
    if old is not None:
        old_public = old.public
        trusted = trusted_keys_dir(path)
        trusted.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_bytes_atomic(trusted / f"{old_public.id}{PUBLIC_SUFFIX}", old_public.pem(),
                           mode=0o644)
        path.unlink()
        public_key_file(path).unlink(missing_ok=True)
    return old_public, generate_signing_key(path)


# ----------------------------------------------------------------------------- status
class RecordKeyStatus(NamedTuple):
    """The operator's private signing key: its file, whether it exists, whether its mode keeps
    it private (0600 or stricter; False when missing), and its key id (None when missing or
    unreadable)."""

    path: Path
    exists: bool
    mode_ok: bool
    key_id: str | None


def record_key_status() -> RecordKeyStatus:
    """Where the operator's record signing key is and whether it is usable (never creates it)."""
    path = signing_key_file()
    try:
        st = os.stat(path)
    except OSError:
        return RecordKeyStatus(path, os.path.lexists(path), False, None)
    mode_ok = stat.S_ISREG(st.st_mode) and not st.st_mode & 0o077
    try:
        key = load_signing_key(path)
    except RecordKeyError:
        key = None
    return RecordKeyStatus(path, True, mode_ok, key.id if key else None)
