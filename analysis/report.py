"""A run's report: ``report.json`` built from its verified record, and the files written from it.

``build_report(run_dir)`` assembles the sections — the run header and submissions
(``summary``), process metrics (``process_metrics``), the training route and code timeline
(``attribution``), failures (``failures``), the best submission's item outcomes
(``outcomes``), the driver model's calls and steps (``driver``), and the paired interval of the
improvement, the final split and the submissions' provenance (``trust``) — into a dict that validates against ``schemas/report.schema.json``.
``write_report`` verifies the record, builds the report and writes it with its Markdown, SVG
(``plot``) and HTML (``report_pages``) renderings. Every number is derived from the record
(events, journal, results, snapshots, logs); metric definitions are in docs/analysis.md.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from a2c import __version__
from a2c.contracts.bundle import BundleManifest, read_manifest
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.spec import TaskSpec
from a2c.errors import BundleError
from a2c.fsutil import PRIVATE_FILE, private_dir, private_run_dir, write_text_atomic

from .attribution import training_and_timeline
from .contamination import contamination_section
from .driver import driver_section
from .failures import analyse_failures
from .formats import WrittenFiles
from .outcomes import best_outcomes
from .process_metrics import process_metrics
from .record import RunRecord
from .report_doc import Producer, Report, Scores
from .rows import rows_of
from .summary import RunHeader, rows_as_dicts, run_header, submission_rows
from .trust import trust_sections
from .values import finite, rounded
from .verify import Verification, VerificationError, verify_run

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "report.schema.json"


@lru_cache(maxsize=1)
def report_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError if the report does not match its schema."""
    jsonschema.Draft202012Validator(report_schema()).validate(report)


def _bundle_manifest(root: Path) -> BundleManifest | None:
    """The run's copy of its bundle's manifest (None when it is missing or unreadable)."""
    try:
        return BundleManifest.from_dict(read_manifest(RunPaths(root).bundle, "Task"))
    except (OSError, ValueError, TypeError, BundleError):
        return None


def _scoring_policy(bundle: BundleManifest | None) -> str | None:
    body = bundle.body if bundle else None
    return body.scoring.policy if isinstance(body, TaskSpec) else None


def _producer(header: RunHeader, bundle: BundleManifest | None) -> Producer:
    return Producer(a2c_version=__version__, run_a2c_version=header.versions.get("a2c"),
                    compiler_version=bundle.compiler_version if bundle else None,
                    spec_hash=header.spec_hash or (bundle.spec_hash if bundle else None),
                    bundle_digest=header.bundle_digest)


def assemble_report(run_dir: str | Path, verification: Verification | None = None,
                    forced: bool = False) -> Report:
    """The run's report, typed (the sections are named in the module doc)."""
    root = Path(run_dir)
    record = RunRecord.load(root)
    verification = verification or verify_run(root, record)
    header = run_header(record)
    baseline = record.baseline_score
    rows = submission_rows(record, baseline)
    metrics = process_metrics(record, rows, baseline, header)
    best_sub = next((s for s in rows if s.index == metrics.best_index), None)
    best_score = best_sub.score if best_sub else None
    last_valid = [s for s in rows if s.valid and s.score is not None]
    subs = rows_as_dicts(rows)          # the JSON the route fills each row's snapshot in
    route, timeline = training_and_timeline(record, subs, header.mode)
    failures = analyse_failures(record, record.submissions)
    bundle = _bundle_manifest(root)
    trust = trust_sections(record, best_sub.id if best_sub else None)
    return Report(
        producer=_producer(header, bundle),
        verification={**verification.to_dict(), "forced": bool(forced and not verification.ok)},
        run=header,
        scores=Scores(baseline=baseline, best=best_score,
                      best_submission=best_sub.id if best_sub else None,
                      final=finite(record.info.final_score),
                      last_valid=last_valid[-1].score if last_valid else None,
                      improvement=rounded(best_score - baseline) if best_score is not None
                      and baseline is not None else None,
                      scoring_policy=_scoring_policy(bundle)),
        submissions=tuple(rows_of(subs)),
        metrics=metrics,
        route=route,
        timeline=timeline,
        failures=[f.to_dict() for f in failures],
        failure_counts=dict(sorted(Counter(f.category for f in failures).items())),
        outcomes=best_outcomes(record, rows, header.level, metrics.best_index),
        driver=driver_section(record, subs),
        improvement=trust.improvement, final_split=trust.final_split,
        provenance=trust.provenance,
        contamination=contamination_section(record),
    )


def checked_report(run_dir: str | Path, verification: Verification | None = None,
                   forced: bool = False) -> Report:
    """The assembled report, its JSON checked against the schema (ValidationError if not)."""
    report = assemble_report(run_dir, verification, forced)
    validate_report(report.to_dict())
    return report


def build_report(run_dir: str | Path, verification: Verification | None = None,
                 forced: bool = False) -> dict[str, Any]:
    """report.json: the assembled report as JSON, checked against its schema."""
    return checked_report(run_dir, verification, forced).to_dict()


def write_report(run_dir: str | Path, out_dir: str | Path | None = None, force: bool = False
                 ) -> tuple[dict[str, Any], WrittenFiles]:
    """Verify, build and write report.json, report.md, score_over_time.svg and report.html.

    Raises VerificationError (naming the first problem) for a record that fails verification,
    unless `force`; the forced report then says so at its top.
    """
    from .narrate import read_layer
    from .plot import render_svg
    from .report_pages import render_html, render_markdown

    root = Path(run_dir)
    record = RunRecord.load(root)
    verification = verify_run(root, record)
    if not verification.ok and not force:
        extra = len(verification.problems) - 1
        raise VerificationError(
            f"{root}: the run record failed verification: {verification.first}"
            + (f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else "")
            + "; refusing to report it (run `a2c verify` for details, or pass --force to report "
              "it anyway, marked as unverified)")
    typed = checked_report(root, verification, forced=force)
    report = typed.to_dict()
    out = Path(out_dir) if out_dir else root / "report"
    private_run_dir(root)                   # private by default (a2c.fsutil): 0700, 0600
    private_dir(out)
    svg = out / "score_over_time.svg"
    paths = WrittenFiles(json=out / "report.json", md=out / "report.md",
                         html=out / "report.html", svg=svg)
    # Insertion order (not sorted keys): the file reads in the order of the schema's sections.
    write_text_atomic(paths.json, json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                      mode=PRIVATE_FILE)
    write_text_atomic(svg, render_svg(typed), mode=PRIVATE_FILE)
    layer = read_layer(root)                # RUN/analysis/: the checked case study and review
    write_text_atomic(paths.md, render_markdown(report, svg.name, layer), mode=PRIVATE_FILE)
    write_text_atomic(paths.html, render_html(report, layer), mode=PRIVATE_FILE)
    return report, paths
