"""`a2c verify` of an unpacked public export (analysis/export.py): it verifies only as it is.

export.json must be signed by one of the keys given (`key`, `sig`: Ed25519 over the sha256 of its
canonical JSON without `sig`, `manifest_digest`); an unsigned manifest, or one whose signature
does not verify (edited after the export), fails and its claims are ignored — unless
`allow_unauthenticated` (`a2c verify --no-key`), which accepts them unauthenticated as it accepts
the chain. With a trusted manifest: it names this record (`record_head`, the hash of the last
event); every file the folder holds is listed in it with its sha256 and size (the report and the
snapshot bundle included; a file not listed, altered or missing fails; a symbolic link fails);
a file it declares withheld is absent; a withheld or rewritten file's sealed digest is the seal's;
and the record's own problems (analysis/verify.py) are accepted only when an absent withheld file
explains them, or — for a file the export rewrote (host folders named, secrets redacted) — when
they are the seal's alone and the file is the one the manifest hashes. Every snapshot commit is in
snapshots.bundle, or the commit the manifest maps it to.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.contracts.event_payloads import RecordSealed
from a2c.contracts.record_key import PublicKey
from a2c.errors import A2CError

from .export_manifest import EXPORT_FORMAT, ExportManifest, FileClaim, FileDigest
from .export_snapshots import SNAPSHOT_BUNDLE, snapshot_problems
from .record import RunRecord

UNSIGNED_FORMATS = ("a2c-export/1",)     # before signed manifests: its claims are never trusted
MANIFEST = "export.json"


def sealed_files(record: RunRecord) -> dict[str, Any]:
    """{path: digest} of the record's last seal."""
    seals = record.payloads(RecordSealed)
    return (seals[-1].data.files or {}) if seals else {}


def file_digest(path: Path) -> FileDigest:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    return FileDigest(sha256=digest.hexdigest(), size=size)


def manifest_digest(manifest: dict[str, Any]) -> str:
    """What export.json's `sig` signs: sha256 of its canonical JSON without `sig`."""
    return hashlib.sha256(canonical_json({k: v for k, v in manifest.items() if k != "sig"})
                          ).hexdigest()


def present_files(root: Path) -> dict[str, str]:
    """{relative path: "file" | "link" | "other"} of everything in the folder but folders."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = "link"
            elif name in files:
                found[rel] = "file" if path.is_file() else "other"
    return found


def _withheld_for(file: str, withheld: dict[str, Any]) -> str | None:
    """The withheld entry a verification problem about `file` is explained by, if any."""
    if file in withheld:
        return file
    if file.startswith("grader/"):
        return "grader/"
    return next((w for w in withheld if w.startswith(file.rstrip("/") + "/")), None)


def _is_withheld(name: str, withheld: dict[str, Any]) -> bool:
    return name in withheld or any(w.endswith("/") and name.startswith(w) for w in withheld)


def _signer(manifest: dict[str, Any], sig: Any, keys: list) -> str | None:
    """The id of the public key among `keys` whose signature (`sig`) export.json carries, if
    any."""
    if not isinstance(sig, str):
        return None
    digest = manifest_digest(manifest)
    return next((k.id for k in keys if isinstance(k, PublicKey) and k.check(digest, sig)), None)


def _file_problems(root: Path, claims: ExportManifest, record: RunRecord
                   ) -> list[tuple[str, str]]:
    """(file, problem): what the folder holds against what the (trusted) manifest lists."""
    files, withheld = claims.files, claims.withheld
    out: list[tuple[str, str]] = []
    present = present_files(root)
    for name, kind in sorted(present.items()):
        if name == MANIFEST:
            continue
        if kind != "file":
            out.append((name, "a symbolic link or special file: an export holds regular files "
                              "only"))
        elif _is_withheld(name, withheld):
            out.append((name, "present, but export.json says it is withheld (a withheld file "
                              "must be absent)"))
        elif name not in files:
            out.append((name, "not in the export's manifest (added after the export)"))
        else:
            have = file_digest(root / name)
            want = FileDigest.from_dict(files[name]) if isinstance(files[name], dict) \
                else FileDigest()
            if have != want:
                out.append((name, f"altered: its content hashes to {str(have.sha256)[:16]}... "
                                  f"({have.size} bytes), the export's manifest gives "
                                  f"{str(want.sha256)[:16]}... ({want.size} bytes)"))
    out += [(name, "missing, but the export's manifest lists it")
            for name in sorted(files) if name not in present]
    out += [(MANIFEST, f"{name}: rewritten, but the manifest gives no digest for what the export "
                       "holds") for name in sorted(claims.rewritten) if name not in files]
    sealed = sealed_files(record)
    for what, entries in (("withheld", claims.withheld), ("rewritten", claims.rewritten)):
        for name, entry in entries.items():
            claim = FileClaim.from_dict(entry) if isinstance(entry, dict) else FileClaim()
            if claim.sealed is not None and claim.sealed != sealed.get(name):
                out.append((MANIFEST, f"{name}: the digest export.json gives the {what} file is "
                                      "not the record's seal"))
    if claims.record_head != record.head:
        out.append((MANIFEST, f"made for another record: its record_head "
                              f"{str(claims.record_head)[:16]}... is not the hash of "
                              "events.jsonl's last event"))
    return out


def _trust(manifest: dict[str, Any], keys: list, allow_unauthenticated: bool
           ) -> tuple[bool, str | None, str]:
    """(claims trusted, signing key id, the check's line)."""
    claims = ExportManifest.from_dict(manifest)
    signer = _signer(manifest, claims.sig, keys) if claims.format == EXPORT_FORMAT else None
    if signer is not None:
        return True, signer, f"export.json signed by public key {signer} (Ed25519)"
    why = (f"export.json is in the unsigned format {claims.format}"
           if claims.format != EXPORT_FORMAT else
           "export.json is not signed" if not claims.sig else
           f"export.json's signature does not verify under a public key given (it names key "
           f"{claims.key!r}; edited after the export?)")
    if allow_unauthenticated:
        return True, None, f"{why} (accepted: --no-key)"
    return False, None, f"{why}: its claims (files withheld, rewritten) are ignored"


def _explain(result, claims: ExportManifest, record: RunRecord) -> list:
    """The record's problems that the trusted manifest does not explain; the checks it explains
    marked as such."""
    from .verify_record import seal_problems
    withheld, rewritten = claims.withheld, claims.rewritten
    seal_found = {(f, m) for f, _, m in seal_problems(record)}
    kept, accepted = [], {}
    for problem in result.problems:
        entry = _withheld_for(problem.file, withheld)
        if entry is not None and problem.file != "events.jsonl":
            accepted[str(problem)] = f"withheld by the export ({entry})"
        elif problem.file in rewritten and (problem.file, problem.message) in seal_found:
            entry = rewritten[problem.file]
            why = FileClaim.from_dict(entry).reason if isinstance(entry, dict) else None
            accepted[str(problem)] = (f"rewritten by the export ({why}; checked against its "
                                      "signed manifest)")
        else:
            kept.append(problem)
    for check in result.checks:
        if not check.ok and check.detail in accepted:
            check.ok, check.detail = True, f"{accepted[check.detail]}: {check.detail}"
    return kept


def verify_exported(run_dir: str | Path, key: Any = "operator",
                    allow_unauthenticated: bool = False):
    """verify_run on an unpacked public archive, as it is (the module's docstring). `key` and
    `allow_unauthenticated` as verify_run takes them; the manifest's signature must hold under
    `key` too, and the result is authenticated only when both the chain and it are."""
    from .verify import Check, Problem, resolve_keys, verify_run

    root = Path(run_dir)
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise A2CError(f"{root / MANIFEST}: unreadable: {exc}") from exc
    if not isinstance(manifest, dict):
        raise A2CError(f"{root / MANIFEST}: not an a2c public export (None)")
    said = ExportManifest.from_dict(manifest)      # what it says, trusted or not
    if said.format not in (EXPORT_FORMAT, *UNSIGNED_FORMATS):
        raise A2CError(f"{root / MANIFEST}: not an a2c public export ({said.format!r})")
    record = RunRecord.load(root)
    result = verify_run(root, record, key=key, allow_unauthenticated=allow_unauthenticated)
    trusted, signer, detail = _trust(manifest, resolve_keys(key)[0], allow_unauthenticated)
    ours: list[Problem] = [] if trusted else [Problem(MANIFEST, None, detail)]
    if signer is None:
        result.authenticated = False
        result.auth_note = result.auth_note or detail
    claims = said if trusted else ExportManifest()
    if trusted and said.format == EXPORT_FORMAT:
        ours += [Problem(f, None, m) for f, m in _file_problems(root, claims, record)]
    else:       # no signed manifest: still, a file said to be withheld must be absent
        ours += [Problem(name, None, "present, but export.json says it is withheld (a withheld "
                                     "file must be absent)")
                 for name in said.withheld if (root / name).is_file()]
    kept = _explain(result, claims, record)
    withheld, mapping = claims.withheld, claims.snapshot_commits
    if (root / SNAPSHOT_BUNDLE).is_file():
        found, n = snapshot_problems(root, record, mapping)
        ours += [Problem(SNAPSHOT_BUNDLE, None, p) for p in found]
        result.checks.append(Check("snapshots", not found, found[0] if found else
                                   f"{n} snapshot commits present in {SNAPSHOT_BUNDLE}"
                                   + (f" ({len(mapping)} rewritten without the files the export "
                                      "leaves out)" if mapping else "")))
    elif record.snapshot_taken and SNAPSHOT_BUNDLE not in withheld:
        ours.append(Problem(SNAPSHOT_BUNDLE, None, f"missing, but the record has "
                                                   f"{len(record.snapshot_taken)} snapshots and "
                                                   "export.json does not withhold it"))
    result.checks.append(Check("export manifest", not ours, str(ours[0]) if ours else detail))
    names = sorted(withheld)
    result.checks.append(Check("withheld", True, f"{len(names)} file(s) withheld by the export"
                                                 + (f": {', '.join(names)}" if names else "")))
    if claims.rewritten:
        names = sorted(claims.rewritten)
        result.checks.append(Check("rewritten", True, f"{len(names)} file(s) rewritten by the "
                                                      f"export: {', '.join(names)}"))
    result.problems = ours + kept
    return result
