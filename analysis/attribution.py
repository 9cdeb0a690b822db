"""Which training code produced each submitted model, whether that obeys the run's mode, and how
the code changed between submissions: the report's `route` and `timeline` sections.

For each submission we read its code snapshot (``snapshots``), detect the training methods of
every code file (``training_methods``), attribute the submitted model to some of those files
(`attribution`: output_path, changed, all, launched, none; docs/analysis.md) and judge the methods
against the mode (``compliance``). The timeline diffs each snapshot against the previous one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.outside import OUTSIDE_PREFIX
from a2c.contracts.run_paths import RunPaths
from a2c.timefmt import iso_utc, parse_time

from . import compliance
from .executed import Executed, executed_code, outside_files
from .launched import launched_training
from .record import RunRecord
from .report_doc import Route
from .rows import SubmissionRow
from .snapshots import MAX_TEXT_BYTES, SnapshotRepo, diff_trees
from .training_methods import FileTraining, analyse_file, is_code
from .values import rounded


class _FileCache:
    """Method detection per (blob, path): a file unchanged across snapshots is read once."""

    def __init__(self, repo: SnapshotRepo):
        self.repo = repo
        self.by_blob: dict[str, FileTraining | None] = {}

    def file(self, path: str, blob: str) -> FileTraining | None:
        key = f"{blob}:{path}"
        if key not in self.by_blob:
            text = self.repo.text(blob)
            self.by_blob[key] = analyse_file(path, text) if text is not None else None
        return self.by_blob[key]


def _attribute(codes: list[FileTraining], changed: set[str], model_path: str | None
               ) -> tuple[list[FileTraining], str]:
    training = [c for c in codes if c.trains]
    if not training:
        return [], "none"
    if model_path:
        name = Path(model_path.rstrip("/")).name
        tail = "/".join(Path(model_path.rstrip("/")).parts[-2:])
        if name and name not in ("output", "model", "."):
            hits = [c for c in training if any(name in s or tail in s for s in c.strings)]
            if hits:
                return hits, "output_path"
    hits = [c for c in training if c.path in changed]
    if hits:
        return hits, "changed"
    return training, "all"


def _upstream(chosen: list[FileTraining], codes: list[FileTraining]) -> list[FileTraining]:
    """Training scripts whose output folder a chosen script starts from (e.g. SFT -> GRPO)."""
    found = list(chosen)
    for code in chosen:
        mine = {s for s in code.strings if "output" in s and len(s) > 7}
        for other in codes:
            if other.trains and other not in found and mine & other.strings:
                found.append(other)
    return found


def _hp_summary(codes: list[FileTraining]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for code in codes:
        for hp in code.hyperparameters:
            values = found.setdefault(hp.name, [])
            if hp.value not in values:
                values.append(hp.value)
    return dict(sorted(found.items()))


LOGGED_HPS = "hyperparameters.json"   # written by the reference agents and the sft-recipe


def _logged_hps(repo: SnapshotRepo, files: dict[str, str]) -> dict[str, list[Any]] | None:
    """The values training logged it ran with (`hyperparameters.json` in the workspace, as the
    submission's snapshot holds it: `steps` ran of `max_steps` planned); None without one. These
    win over what the source says: a default in the code is not what a run under load did."""
    blob = files.get(LOGGED_HPS)
    text = repo.text(blob) if blob else None
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return {str(k): [v] for k, v in sorted(data.items())
            if isinstance(v, (int, float, str, bool)) and k not in ("method", "stage")} or None


def _merge_hps(per_sub: list[dict[str, Any]]) -> dict[str, list[Any]]:
    merged: dict[str, list[Any]] = {}
    for entry in per_sub:
        for key, values in entry["hyperparameters"].items():
            bucket = merged.setdefault(key, [])
            for value in values:
                if value not in bucket:
                    bucket.append(value)
    return dict(sorted(merged.items()))


def _shipped_workspace(folder: Path) -> dict[str, str]:
    """The workspace files as the bundle ships them: the first submission is diffed against
    these when no snapshot precedes it (so the diff shows the agent's work, not the bundle)."""
    shipped: dict[str, str] = {}
    if folder.is_dir():
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.stat().st_size <= MAX_TEXT_BYTES:
                try:
                    shipped[path.relative_to(folder).as_posix()] = path.read_text("utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
    return shipped


def _executed(record: RunRecord, repo: SnapshotRepo) -> Executed:
    """What the command log shows the agent ran outside its workspace (executed.py), against
    the files every snapshot kept from outside."""
    commits = [s.commit for s in record.snapshot_taken]
    head = repo.resolve("refs/heads/main")
    if head and head not in commits:
        commits.append(head)
    return executed_code(record.root, outside_files(repo, commits),
                         getattr(record, "events", None))


def _no_snapshot(sub_id: str) -> dict[str, Any]:
    return {"id": sub_id, "snapshot": None, "methods": [], "attribution": "none",
            "files": [], "adapters": [], "hyperparameters": {}, "evidence": [],
            "compliance": {"verdict": "unknown", "detail": "no code snapshot", "offending": []}}


@dataclass
class _Walk:
    """What one submission's route and diff carry to the next: the previous snapshot, score and
    id, and what the run's route gathers."""

    files: dict[str, str] = field(default_factory=dict)
    commit: str | None = None
    score: float | None = None
    id: str | None = None
    methods: set[str] = field(default_factory=set)
    adapters: set[str] = field(default_factory=set)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Route:
    chosen: list[FileTraining]
    how: str
    gaps: list[str]
    writers: list[str]


def _snapshot_before(record: RunRecord, repo: SnapshotRepo, commit: str, row: SubmissionRow,
                     walk: _Walk) -> None:
    """The first submission is diffed against the last snapshot taken before it."""
    before = [s for s in record.snapshot_taken if s.commit != commit and s.ts is not None
              and row.received_at is not None and iso_utc(s.ts) <= row.received_at]
    if before:
        walk.commit = before[-1].commit
        walk.files = repo.files(walk.commit)


def _route(row: SubmissionRow, codes: list[FileTraining], changed: set[str],
           executed: Executed, launched: list[tuple[float | None, FileTraining]],
           mode: str | None) -> _Route:
    """The code the submitted model is attributed to, how, and what the evidence leaves open."""
    chosen, how = _attribute(codes, changed, row.model_path)
    received = parse_time(row.received_at)
    writers: list[str] = []
    gaps: list[str] = []
    if executed.processes is not None:   # what ran, seen from the host (processes.py)
        chosen, how, gaps, writers = executed.processes.for_submission(
            received, row.model_path, compliance.MODE_ALLOWED.get((mode or "").lower()),
            compliance.FAMILY)
        return _Route(chosen, how, gaps, writers)
    if how == "output_path":
        chosen = _upstream(chosen, codes)
    elif how == "none":
        chosen = [c for stamp, c in launched
                  if stamp is None or received is None or stamp <= received]
        how = "launched" if chosen else "none"
    # code run from outside the workspace (or inline) before it was submitted counts whatever
    # the workspace shows: the route is what ran, not what was left ... and so does training
    # code kept from the agent's /tmp or HOME at this snapshot, seen run or not (the agent can
    # write its command log)
    for extra in executed.code_until(received) + [
            k for k in codes if k.path.startswith(OUTSIDE_PREFIX + "/")]:
        if extra.trains and extra.path not in {k.path for k in chosen}:
            chosen.append(extra)
    gaps = executed.gaps_until(received) + [a for c in chosen for a in c.ambiguous]
    return _Route(chosen, how, gaps, writers)


def _timeline_entry(row: SubmissionRow, walk: _Walk, commit: str, diff: Any,
                    methods: list[str]) -> dict[str, Any]:
    score = row.score if row.valid else None
    return {
        "from_id": walk.id, "to_id": row.id, "from_commit": walk.commit,
        "to_commit": commit, "t_s": row.t_s,
        "files_changed": [{"path": f.path, "status": f.status, "added": f.added,
                           "removed": f.removed} for f in diff.files],
        "lines_added": diff.added, "lines_removed": diff.removed,
        "diff_excerpt": diff.excerpt, "diff_truncated": diff.truncated,
        "score_before": walk.score, "score_after": score,
        "score_change": rounded(score - walk.score) if score is not None
        and walk.score is not None else None,
        "valid": row.valid, "methods": methods}


@dataclass(frozen=True)
class _Context:
    record: RunRecord
    repo: SnapshotRepo
    cache: _FileCache
    shipped: dict[str, str]
    executed: Executed
    launched: list[tuple[float | None, FileTraining]]
    mode: str | None


def _submission(ctx: _Context, row: SubmissionRow, commit: str, walk: _Walk
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the submission's route entry, its timeline entry); `walk` moves on to it."""
    if walk.commit is None:
        _snapshot_before(ctx.record, ctx.repo, commit, row, walk)
    files = ctx.repo.files(commit)
    diff = diff_trees(ctx.repo, walk.files, files,
                      old_text=ctx.shipped if walk.commit is None else None)
    codes = [c for path, blob in sorted(files.items()) if is_code(path)
             for c in [ctx.cache.file(path, blob)] if c is not None]
    route = _route(row, codes, {f.path for f in diff.files}, ctx.executed, ctx.launched,
                   ctx.mode)
    methods = sorted({m for c in route.chosen for m in c.methods})
    adapters = sorted({a for c in route.chosen for a in c.adapters})
    verdict = compliance.compliance(ctx.mode, methods, route.gaps) if row.valid or methods \
        else {"verdict": "n/a", "detail": "invalid submission", "offending": []}
    if row.valid and not row.base_copy:
        walk.verdicts.append(verdict)
        walk.gaps += [g for g in route.gaps if g not in walk.gaps]
    walk.methods.update(methods)
    walk.adapters.update(adapters)
    entry = {"id": row.id, "snapshot": commit, "methods": methods, "attribution": route.how,
             "files": [c.path for c in route.chosen], "adapters": adapters,
             "hyperparameters": _logged_hps(ctx.repo, files) or _hp_summary(route.chosen),
             "evidence": [e.to_dict() for c in route.chosen for e in c.evidence][:12],
             "compliance": verdict, **({"writers": route.writers} if route.writers else {})}
    timeline = _timeline_entry(row, walk, commit, diff, methods)
    walk.files, walk.commit, walk.id = files, commit, row.id
    if row.valid and row.score is not None:
        walk.score = row.score
    return entry, timeline


def _executed_summary(executed: Executed) -> dict[str, Any]:
    out: dict[str, Any] = {"command_log": executed.log_present, "runs": executed.runs[:50],
                           "evidence": "process record" if executed.processes is not None
                           else "command log"}
    if executed.hints:
        out["hints"] = executed.hints
    return out


def training_and_timeline(record: RunRecord, subs: list[dict[str, Any]], mode: str | None
                          ) -> tuple[Route, list[dict[str, Any]]]:
    """(the report's `route`, its `timeline`); fills each row's `snapshot` from the tags."""
    repo = SnapshotRepo(RunPaths(record.root).snapshots)
    if not repo.available:
        return Route(compliance={**compliance.compliance(mode, []),
                                 "detail": "no snapshots.git: the route cannot be read"}), []
    per_submission: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    try:
        executed = _executed(record, repo)
        ctx = _Context(record, repo, _FileCache(repo),
                       _shipped_workspace(RunPaths(record.root).bundle_workspace), executed,
                       launched_training(record), mode)
        walk = _Walk()
        for sub in subs:
            row = SubmissionRow.of(sub)
            commit = row.snapshot
            if commit is None:
                commit = repo.resolve(f"refs/tags/submission-{row.id}")
                sub["snapshot"] = commit
            if commit is None:
                per_submission.append(_no_snapshot(row.id))
                continue
            entry, step = _submission(ctx, row, commit, walk)
            per_submission.append(entry)
            timeline.append(step)
    finally:
        repo.close()
    return Route(available=True, per_submission=per_submission,
                 methods=tuple(sorted(walk.methods)), adapters=tuple(sorted(walk.adapters)),
                 hyperparameters=_merge_hps(per_submission),
                 compliance=compliance.overall(mode, walk.verdicts, sorted(walk.methods),
                                               walk.gaps),
                 executed=_executed_summary(executed)), timeline
