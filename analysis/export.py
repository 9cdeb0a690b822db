"""`a2c export RUN --public`: a shareable archive of a run that anyone can verify, as it is.

The archive (a .tar.gz holding one folder named after the run) keeps the record — events.jsonl
(every event, its hash chain and signatures), run.json, submissions.jsonl, logs/, data/ (the agent
split), agent/, bundle/, trajectory.json and the driver's call bodies — plus the report, the code
snapshots as a git bundle (`snapshots.bundle`) and `export.json`, the manifest. It leaves out the
grader's folder (held-out and final items, gold answers, the grader token, submission copies),
the workspace and the agent's /tmp and HOME (its weights; its code is in the snapshots), the
gateway's key, pid and socket files, and every file that holds a held-out or final item or a
secret: results/*.json (per-item prompts and gold answers) always, anything else when a scan
finds one (the contamination matcher, analysis/contamination.py, and the exact JSON lines and
prompts; the grader token and gateway key in every form a2c.scrub.encoded_forms gives: raw,
reversed, hex, URL-encoded, base64).

Host folders: no absolute host path is shared. Files whose bytes nothing else hashes (run.json
outside the fields the events also hold, the journal, the logs, the gateway's totals) are
rewritten: host folders named symbolically ($RUNS/<id>, $A2C_CACHE, $PROJECT, $HOME, ...:
a2c.scrub) and secrets redacted; export.json names each rewritten file with the digest the seal
gives the original. Files other parts of the record hash (`BOUND`: the events, the driver's
bodies, the trajectory and the transcript it is built from, the bundles, the agent split) are
never rewritten: one holding a secret, an item or a host folder is withheld (events.jsonl: a
secret or an item stops the export; a host folder is named in export.json, `host_paths_kept`).

Snapshots: `snapshots.bundle` holds only the files the contamination scan reads and in which the
export's scan finds no item, secret or host folder; commits that lost a file are rewritten and
mapped (analysis/export_snapshots.py).

export.json is signed with the operator's record signing key (a2c.contracts.record_key): `key`
and `sig`, an Ed25519 signature of the sha256 of its canonical JSON without `sig`. It binds the
record (`record_head`: the hash of the last event, the seal) and lists every file the folder
holds with its sha256 and size (`files`: the report and the bundle included), every withheld
file with its reason and its sealed digest, every rewritten file with its sealed digest.
`a2c verify FOLDER` checks the folder against it as it is (analysis/export_verify.py); the
export verifies its own folder before it writes the archive.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from a2c.contracts.event_payloads import RecordSealed
from a2c.contracts.record_key import SigningKey, load_signing_key, signing_key_file
from a2c.contracts.run_paths import RunPaths
from a2c.errors import A2CError
from a2c.scrub import encoded_forms, host_paths_in, host_roots, symbolize_bytes

from .contamination import (
    ItemIndex,
    agent_split_texts,
    item_texts,
    load_items,
    normalise,
)
from .export_manifest import EXPORT_FORMAT, ExportManifest
from .export_snapshots import SNAPSHOT_BUNDLE, bundle_snapshots
from .export_verify import (
    MANIFEST,
    file_digest,
    manifest_digest,
    present_files,
    sealed_files,
    verify_exported,
)
from .record import RunRecord
from .verify_record import FINISHED_FIELDS, STARTED_FIELDS

KEPT = ("run.json", "events.jsonl", "submissions.jsonl", "trajectory.json", "logs", "data",
        "agent", "bundle", "results", "driver")
DRIVER_SECRET_SUFFIXES = (".key", ".pid", ".port", ".sock")
# Files whose bytes another part of the record hashes: never rewritten.
BOUND = ("events.jsonl", "trajectory.json", "driver/blobs/", "bundle/", "agent/", "data/")


def _secrets(paths: RunPaths) -> dict[str, bytes]:
    """The run's secrets as bytes: the grader token and the driver gateway's key files."""
    found: dict[str, bytes] = {}
    if paths.token.is_file():
        found["grader token"] = paths.token.read_bytes().strip()
    driver = paths.driver
    for key in sorted(driver.glob("*.key")) if driver.is_dir() else []:
        found[f"driver/{key.name}"] = key.read_bytes().strip()
    return {k: v for k, v in found.items() if len(v) >= 8}


class _Scanner:
    """Finds held-out/final items, secrets (in their encoded forms) and host folders in bytes;
    and cleans bytes (secrets redacted, host folders named symbolically)."""

    def __init__(self, paths: RunPaths):
        items = load_items(paths)
        rows = [it for split in items.values() for it in split]
        # The contamination check's own index (gold answers included, so an item written as
        # `A+B=C` is found too); any match keeps a file out, a signature coincidence included:
        # a public export errs on the side of withholding.
        self.index = ItemIndex.from_items(rows, agent_split_texts(paths))
        self.prompts = [normalise(t) for it in rows for t in item_texts(it)]
        self.secrets = _secrets(paths)
        self.forms = sorted(((name, form, data) for name, value in self.secrets.items()
                             for form, data in encoded_forms(value)), key=lambda f: -len(f[2]))
        self.roots = host_roots(paths.root)

    def secret_problems(self, data: bytes) -> list[str]:
        found: dict[str, list[str]] = {}
        for name, form, value in self.forms:
            if value in data:
                found.setdefault(name, []).append(form or "as is")
        return [f"holds the {name} ({', '.join(dict.fromkeys(forms))})"
                for name, forms in found.items()]

    def item_problems(self, data: bytes) -> list[str]:
        text = data.decode("utf-8", "replace")
        items = self.index.match(text)
        if not items:
            flat = normalise(text)
            items = {"(an item's text)" for p in self.prompts if p and p in flat}
        if items:
            return [f"holds held-out/final items ({', '.join(sorted(items)[:5])}"
                    f"{', ...' if len(items) > 5 else ''})"]
        return []

    def problems(self, data: bytes) -> list[str]:
        return self.secret_problems(data) + self.item_problems(data)

    def host_paths(self, data: bytes) -> list[str]:
        return host_paths_in(data, self.roots)

    def blob_verdict(self, data: bytes) -> str | None:
        """Why a snapshot file stays out of the bundle (None: it may be shared)."""
        host = self.host_paths(data)
        return "; ".join(self.problems(data)) or (
            f"holds host folders ({', '.join(host)})" if host else None)

    def clean(self, data: bytes) -> bytes:
        for name, form, value in self.forms:
            data = data.replace(value, f"[redacted:{name}{':' + form if form else ''}]".encode())
        return symbolize_bytes(data, self.roots)

    def clean_run_json(self, data: bytes) -> bytes:
        """run.json cleaned outside the fields `a2c verify` compares with the events (those stay
        what the authenticated events hold)."""
        try:
            run = json.loads(data)
        except ValueError:
            return self.clean(data)
        if not isinstance(run, dict):
            return self.clean(data)
        fixed = set(STARTED_FIELDS) | set(FINISHED_FIELDS)
        out = {k: v if k in fixed else json.loads(self.clean(json.dumps(
            v, ensure_ascii=False).encode()))
               for k, v in run.items()}
        if out == run:
            return data
        return (json.dumps(out, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _bound(name: str, root: Path) -> bool:
    """Is `name` hashed by another part of the record (never rewritten)? The transcript too,
    when the run has a trajectory (built from it)."""
    if name in BOUND or any(name.startswith(b) for b in BOUND if b.endswith("/")):
        return True
    return name.startswith("logs/transcript.") and RunPaths(root).trajectory.is_file()


class _Export:
    """One export being built: what was withheld, rewritten, kept."""

    def __init__(self, root: Path, dest: Path, scanner: _Scanner, sealed: dict[str, Any]):
        self.root, self.dest, self.scanner, self.sealed = root, dest, scanner, sealed
        self.withheld: dict[str, Any] = {}
        self.rewritten: dict[str, Any] = {}
        self.host_kept: dict[str, list[str]] = {}

    def withhold(self, name: str, reason: str) -> None:
        self.withheld[name] = {"reason": reason, "sealed": self.sealed.get(name)}

    def copy_tree(self, rel: str) -> None:
        src = self.root / rel
        files = [src] if not src.is_dir() or src.is_symlink() else \
            sorted(p for p in src.rglob("*") if p.is_file() or p.is_symlink())
        for file in files:
            name = rel if file == src else (Path(rel) / file.relative_to(src)).as_posix()
            if file.is_symlink():
                self.withhold(name, "a symbolic link (an export holds regular files only)")
            elif name.startswith("driver/") and file.suffix in DRIVER_SECRET_SUFFIXES:
                self.withhold(name, "the driver gateway's key or process file")
            elif name.startswith("results/") and name.endswith(".json"):
                self.withhold(name, "per-item prompts, outputs and gold answers")
            elif _bound(name, self.root):
                self._copy_bound(name, file.read_bytes())
            else:
                self._copy_rewritable(name, file.read_bytes())

    def _copy_bound(self, name: str, data: bytes) -> None:
        problems = self.scanner.problems(data)
        host = self.scanner.host_paths(data)
        if name == "events.jsonl":
            if problems:
                raise A2CError(f"events.jsonl {'; '.join(problems)}: the hash-chained record "
                               "cannot be exported without it (refusing)")
            if host:
                self.host_kept[name] = host
        elif problems:
            self.withhold(name, "; ".join(problems))
            return
        elif host:
            self.withhold(name, f"holds host folders ({', '.join(host)}) and its bytes are "
                                "hashed by the record (it cannot be rewritten)")
            return
        self._write(name, data)

    def _copy_rewritable(self, name: str, data: bytes) -> None:
        new = self.scanner.clean_run_json(data) if name == "run.json" else \
            self.scanner.clean(data)
        problems = self.scanner.problems(new)
        if problems:
            self.withhold(name, "; ".join(problems))
            return
        if new != data:
            why = [w for w, hit in (("secrets redacted", self.scanner.secret_problems(data)),
                                    ("host folders named symbolically",
                                     self.scanner.host_paths(data))) if hit]
            self.rewritten[name] = {"reason": ", ".join(why) or "rewritten",
                                    "sealed": self.sealed.get(name)}
        left = self.scanner.host_paths(new)
        if left:          # only in run.json's fields the events hold too
            self.host_kept[name] = left
        self._write(name, new)

    def trajectory_follows(self) -> None:
        """trajectory.json is built from the driver's bodies and the transcript: withheld with
        any of them (`a2c verify` could not rebuild it)."""
        gone = [w for w in self.withheld if w.startswith(("driver/blobs/", "logs/transcript."))]
        if gone and (self.dest / "trajectory.json").is_file():
            (self.dest / "trajectory.json").unlink()
            more = ", ..." if len(gone) > 3 else ""
            self.withhold("trajectory.json", f"built from files the export withholds "
                                             f"({', '.join(gone[:3])}{more})")

    def _write(self, name: str, data: bytes) -> None:
        target = self.dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


# ----------------------------------------------------------------------------- report
def _public_report(root: Path, dest: Path, scanner: _Scanner, export: _Export) -> None:
    from .plot import render_svg
    from .report import build_report
    from .report_doc import Report
    from .report_pages import render_html, render_markdown
    try:
        report = build_report(root)
    except Exception as exc:  # noqa: BLE001 - a report is a convenience, the record is the export
        export.withhold("report/", f"the report could not be built: {exc}")
        return
    if isinstance(report.get("outcomes"), dict):
        report["outcomes"]["examples"] = []      # item prompts, outputs and gold answers
    for name, text in (("report/report.json",
                        json.dumps(report, indent=2, ensure_ascii=False) + "\n"),
                       ("report/report.md", render_markdown(report, "score_over_time.svg")),
                       ("report/report.html", render_html(report)),
                       ("report/score_over_time.svg", render_svg(Report.from_dict(report)))):
        data = scanner.clean(text.encode())
        if problems := scanner.problems(data):
            export.withhold(name, "; ".join(problems))
        else:
            export._write(name, data)


def _listed_files(dest: Path) -> dict[str, Any]:
    return {name: file_digest(dest / name).to_dict()
            for name, kind in sorted(present_files(dest).items())
            if kind == "file" and name != MANIFEST}


def export_public(run_dir: str | Path, out: str | Path | None = None,
                  key: SigningKey | None = None) -> tuple[Path, ExportManifest]:
    """Write the public archive of `run_dir`; return its path and its (signed) manifest.
    `key`: what signs export.json (default: the operator's record signing key)."""
    root = Path(run_dir)
    record = RunRecord.load(root)
    paths = RunPaths(root)
    if not record.payloads(RecordSealed):
        raise A2CError(f"{root}: the record is not sealed (the run has not ended): nothing "
                       "to export yet")
    key = key or load_signing_key()
    if key is None:
        raise A2CError(f"no record signing key at {signing_key_file()}: export.json is signed "
                       "with the operator's key (the one that signed the record)")
    scanner = _Scanner(paths)
    run_id = record.info.run_id or root.name
    target = Path(out) if out else Path(f"{run_id}.public.tar.gz")
    with tempfile.TemporaryDirectory(prefix="a2c-export-") as tmp:
        dest = Path(tmp) / run_id
        dest.mkdir()
        export = _Export(root, dest, scanner, sealed_files(record))
        for rel in KEPT:
            if (root / rel).exists() or (root / rel).is_symlink():
                export.copy_tree(rel)
        export.trajectory_follows()
        snaps = bundle_snapshots(paths.snapshots, dest / SNAPSHOT_BUNDLE, scanner.blob_verdict)
        if snaps.why:
            export.withhold(SNAPSHOT_BUNDLE, snaps.why)
        _public_report(root, dest, scanner, export)
        manifest = ExportManifest(
            format=EXPORT_FORMAT, run_id=run_id, record_head=record.head,
            files=_listed_files(dest), withheld=dict(sorted(export.withheld.items())),
            rewritten=dict(sorted(export.rewritten.items())),
            host_paths_kept=dict(sorted(export.host_kept.items())),
            snapshots=SNAPSHOT_BUNDLE if snaps.bundled else False,
            snapshot_commits=snaps.commits, snapshot_files_left_out=snaps.left_out,
            left_out=["grader/ (held-out and final items, gold answers, token, submission "
                      "copies)", "workspace/, agent-tmp/, agent-home/ (weights; the code is "
                      "in the snapshots)", "snapshots.git (as snapshots.bundle)"],
            key=key.id)
        manifest.sig = key.sign(manifest_digest(manifest.to_dict()))
        (dest / MANIFEST).write_text(json.dumps(manifest.to_dict(), indent=2) + "\n",
                                     encoding="utf-8")
        from .verify import OPERATOR_KEY
        check = verify_exported(dest, key=[OPERATOR_KEY, key], allow_unauthenticated=True)
        if not check.ok:
            raise A2CError(f"{root}: the export would not verify: {check.first}"
                           + (f" (and {len(check.problems) - 1} more)"
                              if len(check.problems) > 1 else "")
                           + "; run `a2c verify` on the run")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(target, "w:gz") as tar:
            tar.add(dest, arcname=run_id)
    return target, manifest
