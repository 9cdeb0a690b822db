"""Integrity of a run record: is what we are about to report what actually happened?

Checks, in order (every problem is collected; the first one is what the CLI names):

1. ``events.jsonl``: the hash chain (``a2c.contracts.events.verify_events``) and that every line is
   exactly the canonical JSON the event log writes (so even a whitespace-only edit is caught);
   and that every event's Ed25519 signature holds under a public key given (by default the
   operator's public keys, a2c.contracts.record_key; a legacy record's HMAC macs only under its
   key file given explicitly): without a key that checks it the chain is "intact, not
   authenticated", which fails unless the caller accepts it explicitly
   (``allow_unauthenticated``, ``a2c verify --no-key``);
2. ``run.json`` is readable and its fields equal the run_started event's (task, agent, mode,
   seed, isolation, base model, data fingerprints, bundle digest, spec hash, budget...) and its
   scores the run_finished event's (analysis/verify_record.py);
3. ``data/train.jsonl`` has the fingerprint the record gives the agent split;
4. ``bundle/``: every file hash and the digest (``a2c.contracts.bundle.load_bundle``), and the digest
   equals ``run.json``'s ``bundle_digest`` and the ``run_started`` event's; likewise the copy of
   the agent bundle (``agent/agent.json``) when the run has one, against ``agent_digest``;
5. ``submissions.jsonl`` (the grader's journal): every scored submission in the journal appears in
   the events with the same score and validity, and every scored event is in the journal;
6. ``results/<n>.json`` of every scored submission (and ``results/baseline.json``) exist and
   agree with the events; with a final split, every ``final_scored`` event's results file holds
   its score, the submission it scored is the one the policy counts, and run.json's final-split
   scores are the events';
7. ``driver/blobs/``: every request and response body a ``driver_call`` event names exists and
   hashes to its name (a missing or altered body is named); and ``trajectory.json``, when the
   run has one, is what the record builds (analysis/trajectory.py ``trajectory_problems``);
8. the seal: the last event is ``record_sealed`` and every sealed file (run.json, the journal,
   results/*, logs/* (append-only), agent/prompt.rendered.md, the data/ tree) matches it
   (a2c.contracts.seal); last, so that a more specific disagreement above is named first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Union

from a2c.contracts.bundle import load_bundle
from a2c.contracts.event_payloads import DriverCall, FinalScored, RunStarted
from a2c.contracts.events import first_non_canonical_line, verify_events
from a2c.contracts.record_key import (
    LegacyHmacKey,
    PublicKey,
    RecordKeyError,
    SigningKey,
    Verifier,
    load_legacy_key,
    load_public_key,
    operator_public_keys,
    verifiers,
)
from a2c.contracts.run_paths import RunPaths
from a2c.errors import A2CError, BundleError

from .record import RunRecord
from .trajectory import trajectory_problems
from .verify_record import data_problems, driver_blob_problems, run_json_problems, seal_problems
from .verify_submissions import final_problems, journal_problems, results_problems

OPERATOR_KEY = "operator"   # verify_run's default: the operator's public keys


class VerificationError(A2CError):
    """A run record failed verification (the report refuses it without --force)."""

    exit_code = 3


@dataclass
class Problem:
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else \
            f"{self.file}: {self.message}"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Verification:
    run_dir: str
    checks: list[Check] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    events: int = 0
    authenticated: bool = False
    auth_note: str | None = None
    key_id: str | None = None
    scheme: str | None = None      # "ed25519", or "hmac-sha256" (a legacy record)

    @property
    def legacy(self) -> bool:
        return self.scheme == "hmac-sha256"

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "events": self.events, "authenticated": self.authenticated,
                "auth_note": self.auth_note, "key_id": self.key_id, "scheme": self.scheme,
                "checks": [asdict(c) for c in self.checks],
                "problems": [asdict(p) for p in self.problems]}


def _check_events(root: Path, out: Verification, keys: list[Verifier], key_error: str | None,
                  allow_unauthenticated: bool) -> None:
    path = RunPaths(root).events
    chain = verify_events(path, keys)
    out.events = chain.events
    out.authenticated = chain.ok and chain.authenticated
    out.key_id, out.scheme = chain.key_id, chain.scheme
    note = chain.auth_note if not key_error else f"{chain.auth_note} ({key_error})"
    problems: list[Problem] = []
    if not chain.ok:
        problems.append(Problem("events.jsonl", chain.bad_line, chain.reason or "broken chain"))
    edited = first_non_canonical_line(path, chain.bad_line) if path.is_file() else None
    if edited is not None:
        problems.append(Problem("events.jsonl", edited, "line is not in the canonical form the "
                                                        "event log writes (edited by hand?)"))
    if path.is_file() and chain.ok and chain.events == 0:
        problems.append(Problem("events.jsonl", None, "no events"))
    problems.sort(key=lambda p: p.line or 0)
    out.problems.extend(problems)
    out.checks.append(Check("event chain", not problems,
                            f"{chain.events} events chained" if not problems else str(problems[0])))
    if problems or chain.events == 0:
        return
    if out.authenticated and chain.legacy:
        out.checks.append(Check("authenticated", True, f"authenticated (legacy HMAC): every "
                                                       f"event's mac holds under the legacy key "
                                                       f"{chain.key_id}"))
        return
    if out.authenticated:
        out.checks.append(Check("authenticated", True, f"every event is signed by public key "
                                                       f"{chain.key_id} (Ed25519)"))
        return
    out.auth_note = f"chain intact, not authenticated: {note}"
    if allow_unauthenticated:
        out.checks.append(Check("authenticated", True, f"{out.auth_note} (accepted: --no-key)"))
        return
    out.problems.append(Problem("events.jsonl", None, out.auth_note))
    out.checks.append(Check("authenticated", False, out.auth_note))


def _check_listed(name: str, found: list[tuple[str, int | None, str]], ok_detail: str,
                  out: Verification) -> None:
    problems = [Problem(file, line, message) for file, line, message in found]
    out.problems.extend(problems)
    out.checks.append(Check(name, not problems, ok_detail if not problems else str(problems[0])))


def _check_bundle(root: Path, record: RunRecord, out: Verification) -> None:
    problems: list[Problem] = []
    bundle_dir = RunPaths(root).bundle
    digest = None
    if not bundle_dir.is_dir():
        problems.append(Problem("bundle", None, "missing: the run has no copy of its bundle"))
    else:
        try:
            bundle = load_bundle(bundle_dir, kind="Task")
            digest = bundle.digest
        except A2CError as exc:
            problems.append(Problem("bundle", None, str(exc).replace(str(bundle_dir) + ": ", "")))
    if digest is not None:
        recorded = record.info.bundle_digest
        if recorded != digest:
            problems.append(Problem("run.json", None, f"bundle_digest {recorded!r} differs from "
                                                      f"the bundle's digest {digest}"))
        started = record.first_payload(RunStarted)
        if started is None:
            problems.append(Problem("events.jsonl", None, "no run_started event"))
        else:
            event_digest = started.data.bundle_digest
            if event_digest is not None and event_digest != digest:
                problems.append(Problem("events.jsonl", started.line,
                                        f"run_started bundle_digest {event_digest!r} differs "
                                        f"from the bundle's digest {digest}"))
    out.problems.extend(problems)
    out.checks.append(Check("bundle digest", not problems,
                            f"bundle {digest} verified" if not problems else str(problems[0])))


def _check_agent(root: Path, record: RunRecord, out: Verification) -> None:
    """The copy of the agent bundle (RUN/agent/agent.json), when the run has one: listed files
    unchanged, the digest rule, and the digest recorded in run.json and run_started."""
    manifest_path = RunPaths(root).agent_manifest
    if not manifest_path.is_file():
        return
    problems: list[Problem] = []
    digest = None
    try:
        bundle = load_bundle(manifest_path.parent, kind="Agent", verify=False)
    except BundleError as exc:
        problems.append(Problem("agent/agent.json", None, "unreadable manifest: "
                                + str(exc).replace(str(manifest_path) + ": ", "")))
    else:
        digest = bundle.digest
        problems += [Problem(f"agent/{path}", None, what) for path, what in bundle.problems()]
    started = record.first_payload(RunStarted)
    for source, recorded in (("run.json", record.info.agent_digest),
                             ("events.jsonl", started.data.agent_digest if started else None)):
        if recorded is not None and digest is not None and recorded != digest:
            problems.append(Problem(source, None, f"agent_digest {recorded!r} differs from the "
                                                  f"agent bundle's digest {digest}"))
    out.problems.extend(problems)
    out.checks.append(Check("agent bundle", not problems,
                            f"agent {digest} verified" if not problems else str(problems[0])))


KeySpec = Union[str, Path, PublicKey, LegacyHmacKey, SigningKey, None]


def resolve_keys(key: KeySpec | list[KeySpec]) -> tuple[list[Verifier], str | None]:
    """(verifiers, why one could not be read) from verify_run's `key`: OPERATOR_KEY (the
    operator's public keys: the current one and those kept at rotations), a key object, a path
    to a public key file (PEM, OpenSSH or hex) or to a legacy HMAC key file, a list of these, or
    None (no key)."""
    items = key if isinstance(key, (list, tuple)) else [key]
    found: list[Verifier] = []
    errors: list[str] = []
    for item in items:
        try:
            if item is None:
                continue
            if isinstance(item, (PublicKey, LegacyHmacKey, SigningKey)):
                found += verifiers(item)
            elif item == OPERATOR_KEY:
                found += operator_public_keys()
            else:
                found.append(load_verifier(item))
        except RecordKeyError as exc:
            errors.append(str(exc))
    if not found and not errors and all(i is None for i in items):
        errors.append("no key given")
    return found, "; ".join(errors) or None


def load_verifier(path: str | Path) -> Verifier:
    """The key in a file: an Ed25519 public key (PEM or OpenSSH), else a legacy HMAC key (64 hex
    digits, 0600). A private signing key is refused: verifying never needs one."""
    path = Path(path)
    try:
        head = path.read_bytes()[:200]
    except OSError as exc:
        raise RecordKeyError(f"{path}: cannot read the key: {exc}") from exc
    text = head.strip()
    if text.startswith((b"-----BEGIN", b"ssh-ed25519")):
        return load_public_key(path)
    legacy = load_legacy_key(path)
    if legacy is None:
        raise RecordKeyError(f"{path}: no such key file")
    return legacy


def verify_run(run_dir: str | Path, record: RunRecord | None = None,
               key: KeySpec | list[KeySpec] = OPERATOR_KEY,
               allow_unauthenticated: bool = False) -> Verification:
    """Verify a run record. `key`: what checks its signatures (resolve_keys; default: the
    operator's public keys; a legacy HMAC record needs its key file in the list). A chain that
    cannot be authenticated is a problem unless `allow_unauthenticated` (then `authenticated` is
    False and `auth_note` says why)."""
    root = Path(run_dir)
    record = record or RunRecord.load(root)
    out = Verification(run_dir=str(root))
    keys, key_error = resolve_keys(key)
    _check_events(root, out, keys, key_error, allow_unauthenticated)
    if not RunPaths(root).run_json.is_file():
        out.problems.append(Problem("run.json", None, "missing"))
        out.checks.append(Check("run.json", False, "missing"))
    elif not record.run:
        out.problems.append(Problem("run.json", None, "not a readable JSON object"))
        out.checks.append(Check("run.json", False, "unreadable"))
    else:
        _check_listed("run.json", run_json_problems(record),
                      "agrees with run_started and run_finished", out)
    _check_listed("agent split", data_problems(record), "fingerprint matches", out)
    _check_bundle(root, record, out)
    _check_agent(root, record, out)
    found, scored = journal_problems(record)
    _check_listed("journal matches events", found, f"{scored} scored submissions agree", out)
    found, checked = results_problems(record)
    _check_listed("results files", found, f"{checked} results files match", out)
    if record.payloads(FinalScored) or RunPaths(root).final_heldout.is_file():
        found, finals = final_problems(record)
        _check_listed("final split", found, f"{finals} final scores match", out)
    if record.payloads(DriverCall):
        found, checked = driver_blob_problems(record)
        _check_listed("driver record", found, f"{checked} call bodies match their hashes", out)
    if RunPaths(root).trajectory.is_file():
        _check_listed("trajectory", [("trajectory.json", None, p)
                                     for p in trajectory_problems(root)[:1]],
                      "trajectory.json is what the driver record builds", out)
    _check_listed("record seal", seal_problems(record), "every sealed file matches", out)
    return out
