"""The final split: scored once, after the agent has stopped, for the counted submission and the
base model.

Why: `/submit` scores on the feedback items, and an agent that submits many variants and keeps
the best is selected on those very items, so the best feedback score overstates its model. With a
final split (`scoring.final` in the task; `RUN/grader/final.jsonl`, written by prepare and never
shown to the agent) the submission the task's policy counts (best or last on feedback) and the
base model are scored on items nobody selected on. The result:

    selection_gap = (feedback score - baseline on feedback) - (final score - baseline on final)

a gain measured on the same items on both sides, so a difference in difficulty between the two
parts does not show up as a gap. Each score is a `final_scored` event and a results file
(results/final-<id>.json, results/final-baseline.json: per-item outputs, so the report can pair
them); `a2c verify` checks them against each other.

Runs in the runtime's process (like the baseline), with the grader's own evaluator child and
configuration; a second call (a resumed run) finds the events and scores nothing again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.contracts.event_payloads import payload_of
from a2c.contracts.events import EventLog, FinalScored, read_events
from a2c.contracts.grade_result import ResultHeader, read_result, read_result_or_none
from a2c.contracts.journal import JournalScored, entry_of, read_journal
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import ServiceConfig
from a2c.fsutil import write_bytes_atomic
from a2c.runtime.grader_service.base_ref import BaseReference
from a2c.runtime.grader_service.baseline import compute_baseline
from a2c.runtime.grader_service.common import log
from a2c.runtime.grader_service.evaluator import run_evaluation
from a2c.runtime.inference.chat_template import SOURCE_KEY


def _sort_key(sid: str):
    return (0, int(sid)) if str(sid).isdigit() else (1, str(sid))


def _scored(run_dir: Path) -> dict[str, JournalScored]:
    """The journal's scored lines by submission id (a string), the last one winning."""
    out: dict[str, JournalScored] = {}
    for row in read_journal(run_dir):
        entry = entry_of(row)
        if isinstance(entry, JournalScored):
            out[str(entry.id)] = entry
    return out


def counted_submission(run_dir: Path, policy: str) -> tuple[str, JournalScored] | None:
    """(id, scored entry) of the submission the policy counts: the best valid feedback score
    (the earliest on a tie) or the last valid one; None without a valid submission."""
    scored = _scored(run_dir)
    valid = [(sid, e) for sid, e in sorted(scored.items(), key=lambda kv: _sort_key(kv[0]))
             if e.valid and e.score is not None]
    if not valid:
        return None
    if policy == "last":
        return valid[-1]
    best = max(float(e.score or 0) for _, e in valid)
    return next((sid, e) for sid, e in valid if float(e.score or 0) == best)


def _write(path: Path, data: dict[str, Any]) -> str:
    write_bytes_atomic(path, canonical_json(data), mode=0o600)
    return path.relative_to(path.parents[1]).as_posix()


def _baseline_feedback(paths: RunPaths) -> float | None:
    data = read_result_or_none(paths.baseline_result)
    if data is None:
        return None
    header = ResultHeader.of(data)
    return header.score if header.ok else None


def _submission_model(paths: RunPaths, sid: str, entry: JournalScored,
                      scored: dict[str, JournalScored]) -> Path | None:
    """The grader's copy that was scored for `sid` (a duplicate's original); None for a copy
    of the base (scored as the baseline)."""
    seen = set()
    current: JournalScored | None = entry
    while current is not None and current.duplicate_of is not None and sid not in seen:
        seen.add(sid)
        if current.duplicate_of == "baseline":
            return None
        sid = str(current.duplicate_of)
        current = scored.get(sid)
    return paths.submissions / sid


def score_final_split(run_dir: str | Path, policy: str = "best") -> dict[str, Any] | None:
    """Score the final split for the counted submission and the baseline; None when the run has
    no final split. Returns {final_split_score, final_split_baseline, selection_gap,
    submission_id, feedback_score, feedback_baseline}."""
    paths = RunPaths(Path(run_dir))
    if not paths.final_heldout.is_file():
        return None
    cfg = ServiceConfig.load(run_dir)
    done = {(f.subject, str(f.submission_id)): f for f in _final_events(paths)}
    events = EventLog(paths.events)

    base = done.get(("baseline", "None"))
    if base is None:
        base = _score_baseline(paths, cfg)
        events.emit(base)
        log(f"final split: baseline {base.score}")

    counted = counted_submission(paths.root, policy)
    sub = None
    if counted is not None:
        sid, entry = counted
        sub = done.get(("submission", sid))
        if sub is None:
            sub = _score_submission(paths, cfg, sid, entry, base)
            events.emit(sub)
            log(f"final split: submission {sid} {sub.score}")
    final_score = sub.score if sub else None
    feedback = sub.feedback_score if sub else None
    gap = None
    if None not in (final_score, base.score, feedback, base.feedback_score):
        gap = round((feedback - base.feedback_score) - (final_score - base.score), 6)
    return {"final_split_score": final_score, "final_split_baseline": base.score,
            "selection_gap": gap, "submission_id": sub.submission_id if sub else None,
            "feedback_score": feedback, "feedback_baseline": base.feedback_score}


def _final_events(paths: RunPaths) -> list[FinalScored]:
    """The `final_scored` events already in the run's log (a resumed run scores nothing
    again)."""
    payloads = (payload_of(row) for row in read_events(paths.events))
    return [p for p in payloads if isinstance(p, FinalScored)]


def _score_baseline(paths: RunPaths, cfg: ServiceConfig) -> FinalScored:
    """The base model on the final items: cached like the feedback baseline (keyed by the
    items)."""
    summary = compute_baseline(task_id=cfg.resolved_task_id(), base_model=cfg.base_model,
                               grader_cfg=cfg.grader_config(), heldout=paths.final_heldout,
                               engine=cfg.engine, cache_dir=cfg.baseline_cache,
                               timeout_s=cfg.eval_timeout_s, run_dir=None,
                               evaluator=cfg.evaluator, use_bwrap=cfg.use_bwrap)
    result = summary.result or {}
    header = ResultHeader.of(result)
    rel = _write(paths.final_result("baseline"), {
        **result, "subject": "baseline", "valid": summary.valid,
        "score": summary.score, "error": summary.error, "cached": summary.cached})
    return FinalScored(subject="baseline", score=summary.score, ci95=summary.ci95,
                       n_items=header.n_items, valid=summary.valid,
                       error=summary.error, feedback_score=_baseline_feedback(paths),
                       cached=summary.cached, elapsed_s=summary.elapsed_s,
                       backend=header.backend, result=rel)


def _score_submission(paths: RunPaths, cfg: ServiceConfig, sid: str, entry: JournalScored,
                      base: FinalScored) -> FinalScored:
    model = _submission_model(paths, sid, entry, _scored(paths.root))
    submission_id = int(sid) if sid.isdigit() else sid
    common = {"subject": "submission", "submission_id": submission_id,
              "feedback_score": entry.score}
    if model is None:   # a copy of the base model: its final score is the baseline's
        result = read_result(paths.root / str(base.result))
        rel = _write(paths.final_result(sid), {**result, "subject": "submission",
                                               "submission_id": submission_id,
                                               "copy_of_base": True})
        return FinalScored(**common, score=base.score, ci95=base.ci95, n_items=base.n_items,
                           valid=bool(base.valid), error=base.error, elapsed_s=0.0,
                           backend=base.backend, result=rel)
    if not model.exists():
        rel = _write(paths.final_result(sid), {"valid": False, "score": None, "error": (
            f"the grader's copy of submission {sid} is gone")})
        return FinalScored(**common, valid=False, error="the grader's copy is gone", result=rel)
    cfg_path = paths.grader / "final.grader.json"
    write_bytes_atomic(cfg_path, canonical_json({
        **cfg.grader_config().to_dict(),
        SOURCE_KEY: BaseReference(cfg.base_model).template_source()}), mode=0o600)
    outcome = run_evaluation(cfg.evaluator_command(), grader_cfg_path=cfg_path, model=model,
                             heldout=paths.final_heldout, engine=cfg.engine,
                             out_path=paths.eval_dir / f"final-{sid}.json",
                             timeout_s=cfg.eval_timeout_s,
                             log_path=paths.eval_dir / f"final-{sid}.log",
                             use_bwrap=cfg.use_bwrap)
    result, header = outcome.result or {}, outcome.header
    valid = outcome.valid
    score = header.score if valid else None
    rel = _write(paths.final_result(sid), {
        **result, "subject": "submission", "submission_id": submission_id,
        "valid": valid, "score": score, "error": outcome.message})
    return FinalScored(**common, score=score, ci95=header.ci95 if valid else None,
                       n_items=header.n_items, valid=valid, error=outcome.message,
                       elapsed_s=round(outcome.elapsed_s, 3), backend=header.backend,
                       result=rel)
