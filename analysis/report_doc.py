"""report.json, typed: the `Report` that analysis/report.py assembles and writes (`to_dict()`,
in the order of the schema's sections, analysis/schemas/report.schema.json) and that its readers
take instead of the JSON: the claim checks (claims.py), the digest (digest.py), the case study
and the review (narrate.py, review.py). A report read back from disk is parsed once,
`Report.from_dict`: an older report lacks newer keys, which take their defaults.

The sections whose producers build typed records are typed here or where they are built (the
header: summary.RunHeader, the rows: rows.SubmissionRow, the intervals: trust.py); the others
(verification, timeline, failures, outcomes, the driver section, the contamination's method and
sources) are kept as the JSON objects their producers write, key order and all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2c.contracts.parts import Part
from a2c.contracts.records import Record, optional

from .rows import SubmissionRow
from .summary import RunHeader
from .trust import FinalSplit, Improvement, ProvenanceSection

REPORT_FORMAT = "a2c-report/1"


@dataclass(frozen=True)
class Producer(Part):
    """What produced the run (its a2c version, the bundle's compiler) and this report."""

    a2c_version: str = ""
    run_a2c_version: str | None = None
    compiler_version: str | None = None
    spec_hash: str | None = None
    bundle_digest: str | None = None


@dataclass(frozen=True)
class Scores(Part):
    """The run's scores: the baseline's, the best valid one (and its submission), run.json's
    final score, the last valid one, best − baseline, and the task's scoring policy."""

    baseline: float | None = None
    best: float | None = None
    best_submission: str | None = None
    final: float | None = None
    last_valid: float | None = None
    improvement: float | None = None
    scoring_policy: str | None = None


@dataclass
class ProcessMetrics(Record):
    """The report's `metrics` (definitions in docs/analysis.md; analysis/process_metrics.py)."""

    n_submissions: int = 0
    n_valid: int = 0
    n_invalid: int = 0
    valid_submission_rate: float | None = None
    first_valid_index: int | None = None
    first_valid_delay_s: float | None = None
    first_improvement_index: int | None = None
    time_to_first_improvement_s: float | None = None
    best_index: int | None = None
    time_to_best_s: float | None = None
    n_improvements: int = 0
    monotonicity: float | None = None
    rank_correlation: float | None = None
    base_model_copies: int = 0
    duplicates: int = 0
    run_duration_s: float | None = None
    agent_time_s: float | None = None
    budget_used_share: float | None = None
    submissions_used_share: float | None = None
    gap_last_submission_to_end_s: float | None = None
    n_snapshots: int = 0


@dataclass(frozen=True)
class Route(Part):
    """The report's `route` (analysis/attribution.py): the training methods found in the code
    of each submission, all of them, the adapters, the hyperparameters, the mode compliance
    verdict (analysis/compliance.py) and what the agent executed (with snapshots only)."""

    available: bool = False
    per_submission: list[dict[str, Any]] = field(default_factory=list)
    methods: tuple[str, ...] = ()
    adapters: tuple[str, ...] = ()
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    compliance: dict[str, Any] = field(default_factory=dict)
    executed: dict[str, Any] | None = optional()


@dataclass(frozen=True)
class Match(Part):
    """A held-out item found in what the agent wrote: its split, how it matched (`by`) and
    where (each place as the scan names it)."""

    id: str = ""
    split: str | None = None
    by: str | None = None
    where: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Matches(Part):
    """The contamination check's findings over a set of texts (the run's or a submission's):
    `counted` the matched items that count toward the flag (older reports: `count` only)."""

    matched: tuple[Match, ...] = ()
    count: int = 0
    share: float = 0.0
    by: dict[str, int] = field(default_factory=dict)
    counted: int | None = None
    counted_share: float | None = None

    @property
    def counted_items(self) -> int:
        return self.count if self.counted is None else self.counted


@dataclass(frozen=True)
class Contamination(Part):
    """The report's `contamination` (analysis/contamination.py; docs/analysis.md)."""

    method: dict[str, Any] = field(default_factory=dict)
    item_counts: dict[str, int] = field(default_factory=dict)
    signatures: Any = None
    n_items: int = 0
    sources: dict[str, Any] = field(default_factory=dict)
    available: bool = False
    flagged: bool = False
    run: Matches = field(default_factory=Matches)
    submissions: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float | None = None


@dataclass(frozen=True)
class Report(Part):
    """report.json (its sections in the schema's order)."""

    format: str = REPORT_FORMAT
    producer: Producer = field(default_factory=Producer)
    verification: dict[str, Any] = field(default_factory=dict)
    run: RunHeader = field(default_factory=RunHeader)
    scores: Scores = field(default_factory=Scores)
    submissions: tuple[SubmissionRow, ...] = ()
    metrics: ProcessMetrics = field(default_factory=ProcessMetrics)
    route: Route = field(default_factory=Route)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    failure_counts: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, Any] | None = None          # None: no submission counts
    driver: dict[str, Any] | None = None
    improvement: Improvement = field(default_factory=Improvement)
    final_split: FinalSplit | None = None
    provenance: ProvenanceSection = field(default_factory=ProvenanceSection)
    contamination: Contamination = field(default_factory=Contamination)
