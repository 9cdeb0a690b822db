"""Failure taxonomy: why submissions were invalid and what went wrong in the run, with evidence.

Each invalid submission (and each run-level failure: no valid submission before the deadline, the
agent crashing, the grader refusing requests) gets one category. The category is decided by the
error code the grader service recorded (`a2c.contracts.submission_errors`, `CODE_CATEGORIES`);
where the code says only that the evaluation failed (the evaluator crashed, the grader marked the
result invalid), the loader's or grader's own message (which carries no code) picks among the
evaluation categories. Records written before the service wrote codes are classified by the
message patterns alone. The evidence is the error, the results file's error and the grader log
lines about that submission, quoted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from a2c.contracts.run_info import RunStatus
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.submission_errors import SubmissionError as E

from .record import RunRecord, Submission

# (category, label, pattern) in priority order: the first match wins.
CATEGORIES: list[tuple[str, str, re.Pattern]] = [
    ("base_copy", "copy of the base model",
     re.compile(r"copy of the base|identical to the base|base model unchanged|same weights as "
                r"the base", re.IGNORECASE)),
    ("duplicate", "duplicate of an earlier submission",
     re.compile(r"duplicate|identical weights|already (?:scored|submitted)", re.IGNORECASE)),
    ("path_refused", "path refused",
     re.compile(r"path_escape|outside (?:the )?output|not inside|path refused|escapes the|"
                r"symlink", re.IGNORECASE)),
    ("timeout", "evaluation timed out",
     re.compile(r"time(?:d)? ?out|timeout|exceeded .*eval_timeout", re.IGNORECASE)),
    ("out_of_memory", "out of memory",
     re.compile(r"out of memory|\bOOM\b|CUDA error: out|MemoryError|killed by signal 9", re.IGNORECASE)),
    ("tokenizer_mismatch", "tokenizer / format mismatch",
     re.compile(r"tokeni[sz]er|chat.?template|vocab(?:ulary)? size|embedding size|"
                r"special token|pad_token|format mismatch|answer format|no answer extracted",
                re.IGNORECASE)),
    ("load_failure", "model failed to load",
     re.compile(r"fail(?:ed)? to load|could not load|can't load|cannot load|unable to load|"
                r"no config\.json|config\.json|safetensors|not a valid model|does not appear to "
                r"have a file|missing weights|OSError|unrecognized model|size mismatch|no such file|"
                r"does not exist|not_found", re.IGNORECASE)),
    ("eval_crash", "evaluation crashed",
     re.compile(r"traceback|exception|error|crash|segfault|exit code|returncode|signal", re.IGNORECASE)),
]
LABELS = {key: label for key, label, _ in CATEGORIES}
LABELS.update({
    "no_submission": "no valid submission before the deadline",
    "agent_crashed": "agent exited with an error",
    "rate_limited": "submission refused: too soon",
    "submission_limit": "submission refused: limit reached",
    "deadline_passed": "submission refused: deadline passed",
    "never_scored": "submission never scored",
    "model_changed": "submitted files changed or deleted before evaluation",
    "other": "other",
    "driver_budget": "driver budget exhausted",
    "driver_errors": "driver calls answered with an error",
})
# The category of each code of an invalid submission; None: the message decides (see above).
CODE_CATEGORIES: dict[str, str | None] = {
    E.MODEL_MOVED: "path_refused", E.PATH_ESCAPE: "path_refused",
    E.MODEL_DELETED: "model_changed", E.MODEL_CHANGED: "model_changed",
    E.EVAL_TIMEOUT: "timeout", E.EVAL_KILLED: "out_of_memory", E.INTERNAL_ERROR: "eval_crash",
    E.EVAL_CRASHED: None, E.EVAL_NO_RESULT: None, E.GRADER_INVALID: None,
}
EVAL_CATEGORIES = ("timeout", "out_of_memory", "tokenizer_mismatch", "load_failure", "eval_crash")
# Requests the grader refused (it logs the code), in the order they are reported.
REFUSAL_CATEGORIES = [(E.PATH_ESCAPE, "path_refused"), (E.TOO_SOON, "rate_limited"),
                      (E.SUBMISSION_LIMIT, "submission_limit"),
                      (E.DEADLINE_PASSED, "deadline_passed")]
SERVICE_REFUSALS = [(category, re.compile(re.escape(code.value), re.IGNORECASE))
                    for code, category in REFUSAL_CATEGORIES]
MAX_EVIDENCE = 5
MAX_LOG_BYTES = 4_000_000


def classify(text: str) -> str:
    for key, _, pattern in CATEGORIES:
        if pattern.search(text or ""):
            return key
    return "other"


def category_of(code: str | None, text: str) -> str:
    """The category of an invalid submission from its code (and, where the code leaves it open,
    its message); `classify(text)` for a record without a code."""
    if not code:
        return classify(text)
    try:
        fixed = CODE_CATEGORIES.get(E(code), "other")
    except ValueError:  # a code this a2c does not know
        return classify(text)
    if fixed is not None:
        return fixed
    found = classify(text)
    return found if found in EVAL_CATEGORIES else "eval_crash"


def _log_lines(root: Path, name: str) -> list[str]:
    path = RunPaths(root).logs / name
    if not path.is_file():
        return []
    with open(path, "rb") as handle:
        size = path.stat().st_size
        if size > MAX_LOG_BYTES:
            handle.seek(size - MAX_LOG_BYTES)
        data = handle.read()
    return data.decode("utf-8", "replace").splitlines()


def _clip(text: str, width: int = 240) -> str:
    text = text.rstrip()
    return text if len(text) <= width else text[:width - 1] + "…"


def _submission_pattern(sub_id: str) -> re.Pattern:
    return re.compile(r"(?:submission|sub|id)[\s#=:\"'_-]*" + re.escape(sub_id) + r"\b", re.IGNORECASE)


def analyse_failures(record: RunRecord, submissions: list[Submission]) -> list[dict[str, Any]]:
    failures: list[dict[str, Any]] = []
    grader_log = _log_lines(record.root, "grader.log")
    for sub in submissions:
        if sub.valid and not sub.base_copy:
            continue
        evidence: list[dict[str, Any]] = []
        texts = []
        if sub.error:
            texts.append(sub.error)
            evidence.append({"source": "events.jsonl", "line": sub.scored_line,
                             "text": _clip(sub.error)})
        result = record.result(sub.result_file) if sub.result_file else None
        if result and result.get("error") and result.get("error") != sub.error:
            texts.append(str(result["error"]))
            for line in str(result["error"]).splitlines()[-3:]:
                evidence.append({"source": sub.result_file, "line": None, "text": _clip(line)})
        pattern = _submission_pattern(sub.id)
        for lineno, line in enumerate(grader_log, start=1):
            if len(evidence) >= MAX_EVIDENCE:
                break
            if pattern.search(line) and re.search(r"error|fail|invalid|traceback|timeout|"
                                                  r"refus|duplicate|copy", line, re.IGNORECASE):
                texts.append(line)
                evidence.append({"source": "logs/grader.log", "line": lineno,
                                 "text": _clip(line)})
        if sub.base_copy:
            category = "base_copy"
        elif not sub.scored:
            category = "never_scored"
        elif sub.duplicate_of and not sub.error:
            category = "duplicate"
        else:
            category = category_of(sub.code, "\n".join(texts))
        if sub.base_copy and not evidence:
            evidence.append({"source": "events.jsonl", "line": sub.scored_line,
                             "text": f"duplicate_of={sub.duplicate_of}"})
        failures.append({"category": category, "label": LABELS[category],
                         "submission_id": sub.id, "message": _clip(sub.error or texts[0]
                                                                   if texts else LABELS[category]),
                         "evidence": evidence[:MAX_EVIDENCE]})
    # Run-level failures.
    if not any(s.valid and not s.base_copy for s in submissions):
        evidence = []
        for event in record.events:
            if event.get("type") in ("deadline_reached", "agent_exited", "run_finished"):
                evidence.append({"source": "events.jsonl", "line": event.get("_line"),
                                 "text": _clip(f"{event['type']} {event.get('data') or {}}")})
        failures.append({"category": "no_submission", "label": LABELS["no_submission"],
                         "submission_id": None,
                         "message": f"{len(submissions)} submission(s), none valid"
                         + (" apart from copies of the base model"
                            if any(s.valid and s.base_copy for s in submissions) else ""),
                         "evidence": evidence[:MAX_EVIDENCE]})
    for event in record.events_of("agent_exited"):
        data = event.get("data") or {}
        code = data.get("returncode")
        if code not in (0, None) and data.get("reason") not in ("deadline", "killed_at_deadline"):
            evidence = [{"source": "events.jsonl", "line": event.get("_line"),
                         "text": _clip(f"agent_exited {data}")}]
            agent_log = _log_lines(record.root, "agent.log")
            hits = [(n, line) for n, line in enumerate(agent_log, start=1)
                    if re.search(r"Traceback|Error|error:|Killed", line)]
            for n, line in hits[-(MAX_EVIDENCE - 1):]:
                evidence.append({"source": "logs/agent.log", "line": n, "text": _clip(line)})
            failures.append({"category": "agent_crashed", "label": LABELS["agent_crashed"],
                             "submission_id": None,
                             "message": f"agent exited with return code {code}"
                                        + (f" ({data.get('reason')})" if data.get("reason") else ""),
                             "evidence": evidence})
    _run_status(record, failures)
    _driver(record, failures)
    for category, pattern in SERVICE_REFUSALS:
        hits = [(n, line) for n, line in enumerate(grader_log, start=1) if pattern.search(line)]
        if hits:
            failures.append({"category": category, "label": LABELS[category],
                             "submission_id": None,
                             "message": f"{len(hits)} request(s) refused by the grader",
                             "evidence": [{"source": "logs/grader.log", "line": n,
                                           "text": _clip(line)} for n, line in hits[:MAX_EVIDENCE]]})
    return failures


def _tail_evidence(record: RunRecord) -> list[dict[str, Any]]:
    tail = record.run.get("agent_log_tail")
    if not isinstance(tail, list):
        return []
    lines = [str(line) for line in tail if str(line).strip()]
    return [{"source": "run.json agent_log_tail", "line": None, "text": _clip(line)}
            for line in lines[-(MAX_EVIDENCE - 1):]]


def _run_status(record: RunRecord, failures: list[dict[str, Any]]) -> None:
    """The run statuses that say how the agent ended (a2c.contracts.run_info): `agent_failed`
    (it exited non-zero) and `no_submission` (it never submitted), with the last lines of its
    log that run.json keeps."""
    status = record.run.get("status")
    tail = _tail_evidence(record)
    if status == RunStatus.AGENT_FAILED:
        crashed = next((f for f in failures if f["category"] == "agent_crashed"), None)
        if crashed is None:
            exit_info = record.run.get("agent_exit") if isinstance(record.run.get("agent_exit"),
                                                                   dict) else {}
            code = exit_info.get("returncode")
            failures.append({"category": "agent_crashed", "label": LABELS["agent_crashed"],
                             "submission_id": None,
                             "message": "run status agent_failed: the agent exited with an "
                                        "error" + (f" (return code {code})" if code is not None
                                                   else ""),
                             "evidence": tail[:MAX_EVIDENCE]})
        elif tail:
            crashed["evidence"] = (crashed["evidence"] + tail)[:MAX_EVIDENCE + len(tail)]
    elif status == RunStatus.NO_SUBMISSION:
        entry = next((f for f in failures if f["category"] == "no_submission"), None)
        if entry is not None:
            entry["message"] = "run status no_submission: the agent never submitted"
            entry["evidence"] = (entry["evidence"] + tail)


def _driver(record: RunRecord, failures: list[dict[str, Any]]) -> None:
    """The driver gateway's refusals and errors: a spent driver budget (each
    `driver_budget_exhausted` event), and calls answered with an error (an upstream down or
    failing, a refused model or key), counted by error."""
    for event in record.events_of("driver_budget_exhausted"):
        data = event.get("data") or {}
        failures.append({"category": "driver_budget", "label": LABELS["driver_budget"],
                         "submission_id": None,
                         "message": f"{data.get('limit')}: {data.get('used')} used of "
                                    f"{data.get('budget')}; later calls were refused",
                         "evidence": [{"source": "events.jsonl", "line": event.get("_line"),
                                       "text": _clip(f"driver_budget_exhausted {data}")}]})
    errors = [e for e in record.events_of("driver_call")
              if (e.get("data") or {}).get("error") or
              _status((e.get("data") or {}).get("status")) >= 400]
    if not errors:
        return
    kinds: dict[str, int] = {}
    for event in errors:
        data = event.get("data") or {}
        kind = str(data.get("error") or f"HTTP {data.get('status')}")
        kinds[kind] = kinds.get(kind, 0) + 1
    failures.append({"category": "driver_errors", "label": LABELS["driver_errors"],
                     "submission_id": None,
                     "message": f"{len(errors)} call(s): " + ", ".join(
                         f"{k} ×{n}" for k, n in sorted(kinds.items())),
                     "evidence": [{"source": "events.jsonl", "line": e.get("_line"),
                                   "text": _clip("driver_call seq {seq} status {status} {error}"
                                                 .format(seq=(e.get("data") or {}).get("seq"),
                                                         status=(e.get("data") or {})
                                                         .get("status"),
                                                         error=(e.get("data") or {})
                                                         .get("error") or ""))}
                                  for e in errors[:MAX_EVIDENCE]]})


def _status(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
