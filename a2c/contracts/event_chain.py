"""The hash chain of `events.jsonl` and its check: each event carries the hash of the one
before it and a signature of its own hash (or, in a legacy record, an HMAC), so `verify_events`
names the first line that was edited, inserted, reordered or deleted, and says whether the
signatures were checked with a key given.

Apart from the writer (a2c.contracts.events): verifying a record never appends to one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json, sha256_bytes

from .record_signatures import ED25519, LEGACY_HMAC, SigningKey, Verifier, verifiers

GENESIS = "0" * 64
AUTH_FIELDS = ("hash", "sig", "mac")      # not covered by an event's hash
SCHEMES = {"sig": ED25519, "mac": LEGACY_HMAC}


def event_hash(event: dict[str, Any]) -> str:
    """sha256 of the event without its `hash`, `sig` and `mac` (the `key` id is covered)."""
    body = {k: v for k, v in event.items() if k not in AUTH_FIELDS}
    return sha256_bytes(canonical_json(body))


@dataclass(frozen=True)
class ChainCheck:
    """`ok`: the hash chain holds and no signature (or legacy mac) is wrong. `authenticated`:
    besides, every event's signature was checked with a key given; when it could not be,
    `auth_note` says why. `scheme`: "ed25519", or "hmac-sha256" for a legacy record."""

    ok: bool
    events: int
    bad_line: int | None = None  # 1-based line number of the first broken line
    reason: str | None = None
    authenticated: bool = False
    key_id: str | None = None
    auth_note: str | None = None
    scheme: str | None = None

    @property
    def legacy(self) -> bool:
        return self.scheme == LEGACY_HMAC


def _auth_field(event: dict[str, Any]) -> str | None | bool:
    """"sig", "mac", None (neither), or False (both: refused)."""
    has = [name for name in ("sig", "mac") if name in event]
    return False if len(has) > 1 else (has[0] if has else None)


def _missing_key_note(scheme: str, record_key: str, given: list[Verifier]) -> str:
    same = [k for k in given if k.scheme == scheme]
    if scheme == LEGACY_HMAC:
        if not same:
            return (f"a legacy HMAC record under key {record_key}; give its key file "
                    "(--key-file) to authenticate it")
        return (f"legacy HMAC key {record_key} not available (the key given is "
                f"{', '.join(k.id for k in same)})")
    if not same:
        return f"public key {record_key} not available"
    return (f"key id mismatch: signed by key {record_key}, not by the public key(s) given "
            f"({', '.join(k.id for k in same)}): re-signed with another key, or an older key of "
            "the operator not given (--public-key)")


def verify_events(path: str | Path, keys: Verifier | SigningKey | list | None = None
                  ) -> ChainCheck:
    """Check every line's hash and link, and with `keys` (public keys; legacy HMAC keys) every
    line's signature; report the first broken line (1-based). Without the record's key the chain
    may be intact but is not authenticated."""
    path = Path(path)
    given = verifiers(keys)
    if not path.exists():
        return ChainCheck(False, 0, None, f"{path} does not exist")
    prev = GENESIS
    count = 0
    record_key: str | None = None
    scheme_field: str | None = None
    checker: Verifier | None = None
    unsigned: int | None = None      # first line without a signature
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                event = json.loads(raw)
            except ValueError as exc:
                return ChainCheck(False, count, lineno, f"not valid JSON: {exc}")
            if not isinstance(event, dict):
                return ChainCheck(False, count, lineno, "not a JSON object")
            if event.get("seq") != count:
                return ChainCheck(False, count, lineno,
                                  f"sequence number {event.get('seq')!r}, expected {count}")
            if event.get("prev") != prev:
                return ChainCheck(False, count, lineno, "does not link to the previous event")
            if event.get("hash") != event_hash(event):
                return ChainCheck(False, count, lineno, "content does not match its hash")
            auth = _auth_field(event)
            if auth is False:
                return ChainCheck(False, count, lineno, "carries both a signature (sig) and a "
                                  "legacy mac")
            if auth is None or "key" not in event:
                unsigned = lineno if unsigned is None else unsigned
            elif record_key is None and unsigned is None:
                record_key, scheme_field = event["key"], auth
                checker = next((k for k in given if k.id == record_key
                                and k.field_name == auth), None)
            if "key" in event and record_key is not None and event["key"] != record_key:
                return ChainCheck(False, count, lineno, f"written with record key "
                                  f"{event['key']!r}, the chain began with {record_key!r}")
            if auth and scheme_field is not None and auth != scheme_field:
                return ChainCheck(False, count, lineno, f"carries a {auth}, the chain began "
                                  f"with a {scheme_field}")
            if checker is not None and auth and not checker.check(event["hash"], event[auth]):
                what = ("signature (sig) does not verify under public key" if auth == "sig"
                        else "authentication code (mac) does not match the legacy HMAC key")
                return ChainCheck(False, count, lineno, f"bad signature: {what} {record_key}: "
                                  "the event was edited or re-signed without the operator's "
                                  "key", key_id=record_key, scheme=SCHEMES[auth])
            prev = event["hash"]
            count += 1
    scheme = SCHEMES.get(scheme_field or "")
    if count == 0:
        return ChainCheck(True, 0, auth_note="no events")
    if unsigned is not None:
        note = (f"line {unsigned} carries no signature (unauthenticated: signatures stripped)"
                if record_key is not None or unsigned > 1
                else "no event carries a signature (unauthenticated: signatures stripped, or a "
                     "record older than the record keys)")
        return ChainCheck(True, count, key_id=record_key, auth_note=note, scheme=scheme)
    if checker is None:
        return ChainCheck(True, count, key_id=record_key, scheme=scheme,
                          auth_note=_missing_key_note(scheme or ED25519, str(record_key), given))
    return ChainCheck(True, count, authenticated=True, key_id=record_key, scheme=scheme)
