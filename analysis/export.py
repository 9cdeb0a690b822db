"""`a2c export RUN --public`: a shareable archive of a run that anyone can verify.

The archive (a .tar.gz holding one folder named after the run) keeps the record — events.jsonl
(every event, its hash chain and signatures), run.json, submissions.jsonl, logs/, data/ (the agent
split), agent/, bundle/, trajectory.json and the driver's call bodies — plus the report, the code
snapshots as a git bundle (`snapshots.bundle`) and `export.json`, the manifest. It leaves out the
grader's folder (held-out and final items, gold answers, the grader token, submission copies),
the workspace and the agent's /tmp and HOME (its weights; its code is in the snapshots), the
gateway's key, pid and socket files, and every file that holds a held-out or final item or a
secret: results/*.json (per-item prompts and gold answers) always, anything else when a scan
finds one (the contamination matcher, analysis/contamination.py, and the exact JSON lines and
prompts; the grader token and gateway key as bytes). A withheld sealed file is listed in
`export.json` with its sealed digest, so `a2c verify` of the unpacked archive (verify_exported)
checks the chain, the signatures and every file present, and names exactly what was withheld.
The report is rebuilt without its item examples. events.jsonl cannot be edited without breaking
the chain: an event that holds a secret or an item stops the export with an error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.errors import A2CError

from .contamination import ItemIndex, agent_split_texts, item_texts, load_items, normalise
from .record import RunRecord

EXPORT_FORMAT = "a2c-export/1"
MANIFEST = "export.json"
KEPT = ("run.json", "events.jsonl", "submissions.jsonl", "trajectory.json", "logs", "data",
        "agent", "bundle", "results", "driver")
DRIVER_SECRET_SUFFIXES = (".key", ".pid", ".port", ".sock")
SNAPSHOT_BUNDLE = "snapshots.bundle"


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
    """Finds held-out/final items and secrets in bytes."""

    def __init__(self, paths: RunPaths):
        items = load_items(paths)
        rows = [it for split in items.values() for it in split]
        self.index = ItemIndex.build([(str(it.get("id")), item_texts(it)) for it in rows],
                                     agent_split_texts(paths))
        self.prompts = [normalise(t) for it in rows for t in item_texts(it)]
        self.lines = [json.dumps(it, ensure_ascii=False).encode() for it in rows]
        self.raw = (paths.heldout, paths.final_heldout)
        self.secrets = _secrets(paths)

    def problems(self, data: bytes) -> list[str]:
        found = [f"holds the {name}" for name, value in self.secrets.items() if value in data]
        text = data.decode("utf-8", "replace")
        items = self.index.match(text)
        if not items:
            flat = normalise(text)
            items = {"(an item's text)" for p in self.prompts if p and p in flat}
        if items:
            found.append(f"holds held-out/final items ({', '.join(sorted(items)[:5])}"
                         f"{', ...' if len(items) > 5 else ''})")
        return found


def _sealed(record: RunRecord) -> dict[str, Any]:
    seals = record.events_of("record_sealed")
    return ((seals[-1].get("data") or {}).get("files") or {}) if seals else {}


def _copy_tree(src: Path, dest: Path, rel: str, scanner: _Scanner, sealed: dict[str, Any],
               withheld: dict[str, Any]) -> None:
    for file in sorted(p for p in src.rglob("*") if p.is_file() or p.is_symlink()) \
            if src.is_dir() else [src]:
        name = (Path(rel) / file.relative_to(src)).as_posix() if src.is_dir() else rel
        if file.is_symlink():
            continue
        reason = None
        if name.startswith("driver/") and file.suffix in DRIVER_SECRET_SUFFIXES:
            reason = "the driver gateway's key or process file"
        elif name.startswith("results/") and name.endswith(".json"):
            reason = "per-item prompts, outputs and gold answers"
        else:
            problems = scanner.problems(file.read_bytes())
            if problems and name == "events.jsonl":
                raise A2CError(f"events.jsonl {'; '.join(problems)}: the hash-chained record "
                               "cannot be exported without it (refusing)")
            reason = "; ".join(problems) or None
        if reason:
            withheld[name] = {"reason": reason, "sealed": sealed.get(name)}
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)


def _snapshots(paths: RunPaths, dest: Path, scanner: _Scanner, contaminated: bool,
               withheld: dict[str, Any]) -> bool:
    """snapshots.git as a git bundle, unless a blob holds an item or a secret."""
    git = paths.snapshots
    if not git.is_dir():
        return False
    if contaminated:
        withheld[SNAPSHOT_BUNDLE] = {"reason": "the contamination check found held-out items in "
                                               "the snapshots", "sealed": None}
        return False
    proc = subprocess.run(["git", f"--git-dir={git}", "cat-file", "--batch-all-objects",
                           "--batch"], capture_output=True, check=False)
    leaks = [name for name, value in scanner.secrets.items() if value in proc.stdout]
    if leaks or proc.returncode:
        withheld[SNAPSHOT_BUNDLE] = {"reason": "a snapshot holds " + ", ".join(leaks)
                                     if leaks else "git could not read the snapshots",
                                     "sealed": None}
        return False
    done = subprocess.run(["git", f"--git-dir={git}", "bundle", "create", "-q",
                           str(dest / SNAPSHOT_BUNDLE), "--all"], capture_output=True)
    return done.returncode == 0


def _public_report(root: Path, dest: Path, scanner: _Scanner, withheld: dict[str, Any]) -> None:
    from .report import build_report
    from .report_pages import render_html, render_markdown
    try:
        report = build_report(root)
    except Exception as exc:  # noqa: BLE001 - a report is a convenience, the record is the export
        withheld["report/"] = {"reason": f"the report could not be built: {exc}", "sealed": None}
        return
    if isinstance(report.get("outcomes"), dict):
        report["outcomes"]["examples"] = []      # item prompts, outputs and gold answers
    out = dest / "report"
    out.mkdir()
    for name, text in (("report.json", json.dumps(report, indent=2, ensure_ascii=False) + "\n"),
                       ("report.md", render_markdown(report, "score_over_time.svg")),
                       ("report.html", render_html(report))):
        if problems := scanner.problems(text.encode()):
            withheld[f"report/{name}"] = {"reason": "; ".join(problems), "sealed": None}
        else:
            (out / name).write_text(text, encoding="utf-8")


def export_public(run_dir: str | Path, out: str | Path | None = None) -> tuple[Path, dict]:
    """Write the public archive of `run_dir`; return its path and its manifest."""
    root = Path(run_dir)
    record = RunRecord.load(root)
    paths = RunPaths(root)
    if not record.events_of("record_sealed"):
        raise A2CError(f"{root}: the record is not sealed (the run has not ended): nothing "
                       "to export yet")
    scanner = _Scanner(paths)
    sealed = _sealed(record)
    run_id = record.run.get("run_id") or root.name
    target = Path(out) if out else Path(f"{run_id}.public.tar.gz")
    withheld: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="a2c-export-") as tmp:
        dest = Path(tmp) / run_id
        dest.mkdir()
        for rel in KEPT:
            if (root / rel).exists():
                _copy_tree(root / rel, dest, rel, scanner, sealed, withheld)
        from .contamination import contamination_section
        contaminated = any(w["kind"] == "snapshot" for m in contamination_section(record)[
            "run"]["matched"] for w in m["where"])
        has_bundle = _snapshots(paths, dest, scanner, contaminated, withheld)
        _public_report(root, dest, scanner, withheld)
        manifest = {"format": EXPORT_FORMAT, "run_id": run_id, "snapshots": has_bundle and
                    SNAPSHOT_BUNDLE, "withheld": dict(sorted(withheld.items())),
                    "left_out": ["grader/ (held-out and final items, gold answers, token, "
                                 "submission copies)", "workspace/, agent-tmp/, agent-home/ "
                                 "(weights; the code is in the snapshots)",
                                 "snapshots.git (as snapshots.bundle)"]}
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(target, "w:gz") as tar:
            tar.add(dest, arcname=run_id)
    return target, manifest


def _withheld_for(file: str, withheld: dict[str, Any]) -> str | None:
    """The withheld entry a verification problem about `file` is explained by, if any."""
    if file in withheld:
        return file
    if file.startswith("grader/"):
        return "grader/"
    return next((w for w in withheld if w.startswith(file.rstrip("/") + "/")), None)


def _snapshot_problems(root: Path, record: RunRecord) -> tuple[list[str], int]:
    """Every snapshot event's commit must be in snapshots.bundle."""
    bundle = root / SNAPSHOT_BUNDLE
    commits = [s["commit"] for s in record.snapshots]
    with tempfile.TemporaryDirectory(prefix="a2c-verify-") as tmp:
        git = ["git", f"--git-dir={tmp}"]
        subprocess.run([*git, "init", "-q", "--bare"], check=True, capture_output=True)
        fetched = subprocess.run([*git, "fetch", "-q", str(bundle), "refs/*:refs/*"],
                                 capture_output=True, text=True)
        if fetched.returncode:
            return [f"{SNAPSHOT_BUNDLE}: unreadable ({fetched.stderr.strip()[:200]})"], 0
        missing = [c for c in commits if subprocess.run(
            [*git, "cat-file", "-e", f"{c}^{{commit}}"], capture_output=True).returncode]
    return [f"{SNAPSHOT_BUNDLE}: snapshot commit {c} missing" for c in missing], len(commits)


def verify_exported(run_dir: str | Path, **kwargs: Any):
    """verify_run on an unpacked public archive: a problem explained by a file the export
    withheld (export.json) is accepted and named as withheld; the withheld files' sealed digests
    must be the seal's; the snapshot commits the events name must be in snapshots.bundle."""
    from .verify import Check, Problem, verify_run

    root = Path(run_dir)
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    if manifest.get("format") != EXPORT_FORMAT:
        raise A2CError(f"{root / MANIFEST}: not an a2c public export ({manifest.get('format')!r})")
    withheld = manifest.get("withheld") or {}
    record = RunRecord.load(root)
    result = verify_run(root, record, **kwargs)
    kept, accepted = [], set()
    for problem in result.problems:
        entry = _withheld_for(problem.file, withheld)
        if entry is not None and problem.file != "events.jsonl":
            accepted.add(str(problem))
        else:
            kept.append(problem)
    sealed = _sealed(record)
    for name, entry in withheld.items():
        if entry.get("sealed") is not None and entry["sealed"] != sealed.get(name):
            kept.append(Problem(MANIFEST, None, f"{name}: the digest export.json gives is not "
                                                "the record's seal"))
    for check in result.checks:
        if not check.ok and check.detail in accepted:
            check.ok, check.detail = True, f"withheld by the export ({check.detail})"
    if (root / SNAPSHOT_BUNDLE).is_file():
        found, n = _snapshot_problems(root, record)
        kept += [Problem(SNAPSHOT_BUNDLE, None, p) for p in found]
        result.checks.append(Check("snapshots", not found, found[0] if found else
                                   f"{n} snapshot commits present in {SNAPSHOT_BUNDLE}"))
    names = sorted(withheld)
    result.checks.append(Check("withheld", True, f"{len(names)} file(s) withheld by the export"
                                                 + (f": {', '.join(names)}" if names else "")))
    result.problems = kept
    return result
