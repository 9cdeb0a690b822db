"""The checks of `a2c verify` (analysis/verify.py) that cross the submissions' three records:
the grader's journal (`submissions.jsonl`) against the `submission_*` events, the results files
against both, and the final split's `final_scored` events against their results files, the
journal and run.json. Each returns its problems as (file, line, message) and what it checked,
and verify.py turns them into its Check rows.
"""

from __future__ import annotations

import math
from typing import Any

from a2c.contracts.event_payloads import (
    BaselineScored,
    FinalScored,
    SubmissionReceived,
    SubmissionScored,
)
from a2c.contracts.journal import JournalReceived, JournalScored
from a2c.contracts.run_info import UNSET
from a2c.contracts.run_paths import RunPaths

from .record import RunRecord, sid
from .result_file import ResultFile

Found = list[tuple[str, int | None, str]]


def same_number(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    except (TypeError, ValueError):
        return False


def journal_problems(record: RunRecord) -> tuple[Found, int]:
    """(problems, scored submissions in the journal): every scored line of the journal has a
    submission_scored event with its score and validity, every received line a
    submission_received event, and every scored event a journal line."""
    found: Found = [("submissions.jsonl", line, message)
                    for line, message in record.journal_problems]
    scored_payloads = record.payloads(SubmissionScored)
    if not RunPaths(record.root).journal.is_file() and scored_payloads:
        found.append(("submissions.jsonl", None, "missing, but events record scored "
                                                 "submissions"))
    scored_events = {sid(e.data.id): e for e in scored_payloads}
    received = {sid(e.data.id) for e in record.payloads(SubmissionReceived)}
    journal_scored: set[str] = set()
    for row in record.journal_entries:
        entry = row.data
        if isinstance(entry, JournalScored):
            key = sid(entry.id)
            journal_scored.add(key)
            event = scored_events.get(key)
            if event is None:
                found.append(("submissions.jsonl", row.line, f"submission {key} is scored in "
                              f"the journal but has no submission_scored event"))
                continue
            if not same_number(entry.score, event.data.score):
                found.append(("submissions.jsonl", row.line, f"submission {key}: journal "
                              f"score {entry.score!r} != event score {event.data.score!r}"))
            if bool(entry.valid) != bool(event.data.valid):
                found.append(("submissions.jsonl", row.line, f"submission {key}: journal "
                              f"valid={entry.valid!r} != event valid={event.data.valid!r}"))
        elif isinstance(entry, JournalReceived) and sid(entry.id) not in received:
            found.append(("submissions.jsonl", row.line, f"submission {sid(entry.id)} is "
                          f"received in the journal but has no submission_received event"))
    for key, event in scored_events.items():
        if key not in journal_scored:
            found.append(("events.jsonl", event.line, f"submission {key} is scored in the "
                          f"events but not in the journal"))
    found.sort(key=lambda p: (p[0] != "submissions.jsonl", p[1] or 0))
    return found, len(journal_scored)


def results_problems(record: RunRecord) -> tuple[Found, int]:
    """(problems, results files checked): the file of every scored journal line, and
    results/baseline.json, exist and hold the score and validity recorded."""
    found: Found = []
    checked = 0
    for row in record.journal_entries:
        entry = row.data
        if not isinstance(entry, JournalScored):
            continue
        key = sid(entry.id)
        relative = entry.result or f"results/{key}.json"
        if not (record.root / relative).is_file():
            found.append((relative, None, f"missing (journal line {row.line}, submission "
                                          f"{key})"))
            continue
        raw = record.result(relative)
        if raw is None:
            found.append((relative, None, "not a readable JSON object"))
            continue
        checked += 1
        result = ResultFile.from_dict(raw)
        score, valid = result.score, result.valid
        if "score" in raw and not same_number(score, entry.score) \
                and entry.score is not None:
            found.append((relative, None, f"score {score!r} != journal score {entry.score!r} "
                                          f"(submission {key})"))
        if "valid" in raw and bool(valid) != bool(entry.valid):
            found.append((relative, None, f"valid={valid!r} != journal valid={entry.valid!r}"))
    baseline = record.first_payload(BaselineScored)
    if baseline is not None:
        relative = "results/baseline.json"
        result = ResultFile.of(record.result(relative))
        if result is None:
            found.append((relative, None, "missing or unreadable, but the events record a "
                                          "baseline score"))
        else:
            checked += 1
            score = baseline.data.score
            if score is not None and not same_number(result.score, score):
                found.append((relative, None, f"score {result.score!r} != "
                                              f"baseline_scored event {score!r}"))
    return found, checked


def counted_submission(record: RunRecord) -> str | None:
    """The submission the scoring policy counts, from the journal (best: the earliest of the
    highest valid scores; last: the last valid one)."""
    valid = [row.data for row in record.journal_entries if isinstance(row.data, JournalScored)
             and row.data.valid and row.data.score is not None]
    if not valid:
        return None
    if (record.info.scoring_spec.policy or "best") == "last":
        return sid(valid[-1].id)
    best = max(float(entry.score) for entry in valid)  # type: ignore[arg-type]
    return sid(next(e for e in valid if float(e.score) == best).id)  # type: ignore[arg-type]


def _final_file_problem(record: RunRecord, event: FinalScored, line: int | None
                        ) -> tuple[str, int | None, str] | None:
    where = f"final_scored ({event.subject}, events.jsonl line {line})"
    relative = event.result or ""
    result = ResultFile.of(record.result(relative)) if relative else None
    if result is None:
        return (relative or "results/", None, f"missing or unreadable, but {where} names it")
    score, valid, items = result.score, result.valid, result.items
    if not same_number(score, event.score) or bool(valid) != bool(event.valid):
        return (relative, None, f"score {score!r} (valid={valid!r}) != {where} "
                                f"{event.score!r}")
    if items is not None and event.n_items is not None and len(items) != event.n_items:
        return (relative, None, f"{len(items)} items, {where} says {event.n_items}")
    return None


def final_problems(record: RunRecord) -> tuple[Found, int]:
    """(problems, final scores): each final_scored event's file exists and holds its score; the
    submission scored is the one the policy counts, with the feedback score the journal gives
    it; run.json's final-split scores are the events'."""
    found: Found = []
    events = record.payloads(FinalScored)
    by_subject: dict[str, FinalScored] = {}
    for event in events:
        by_subject[str(event.data.subject)] = event.data
        problem = _final_file_problem(record, event.data, event.line)
        if problem is not None:
            found.append(problem)
    sub = by_subject.get("submission")
    if sub is not None:
        counted = counted_submission(record)
        if sid(sub.submission_id) != counted:
            found.append(("events.jsonl", None, f"the final split scored submission "
                          f"{sub.submission_id!r}, but the scoring policy counts {counted!r}"))
        entry = next((r.data for r in record.journal_entries
                      if isinstance(r.data, JournalScored)
                      and sid(r.data.id) == sid(sub.submission_id)), None)
        if entry is not None and not same_number(entry.score, sub.feedback_score):
            found.append(("events.jsonl", None, f"final_scored feedback_score "
                          f"{sub.feedback_score!r} != the journal's {entry.score!r}"))
    info = record.info
    for key, value, subject in (("final_split_score", info.final_split_score, "submission"),
                                ("final_split_baseline", info.final_split_baseline, "baseline")):
        event = by_subject.get(subject)
        if value is not None and value is not UNSET and \
                not same_number(value, event.score if event else None):
            found.append(("run.json", None, f"{key} {value!r} is not the final_scored "
                          f"{subject} event's"))
    return found, len(events)
