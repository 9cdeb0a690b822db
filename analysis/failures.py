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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from a2c.contracts.events import AgentExited, DriverBudgetExhausted, DriverCall, payload_of
from a2c.contracts.run_info import RunStatus
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.submission_errors import SubmissionError as E

from .record import RunRecord, Submission
from .result_file import ResultFile

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


@dataclass(frozen=True)
class Evidence:
    """A quoted line of the record: the file (`source`), its line number when known."""

    source: str
    line: int | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Failure:
    """One entry of the report's failure list."""

    category: str
    message: str
    evidence: tuple[Evidence, ...] = ()
    submission_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "label": LABELS[self.category],
                "submission_id": self.submission_id, "message": self.message,
                "evidence": [e.to_dict() for e in self.evidence]}


@dataclass(frozen=True)
class _Logged:
    """An event as the failure list quotes it: its line in events.jsonl, its payload as
    recorded (for the quote) and as typed (for the decisions)."""

    line: int | None
    type: str
    raw: dict[str, Any]
    payload: Any

    @classmethod
    def of(cls, event: dict[str, Any]) -> _Logged:
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        return cls(event.get("_line"), str(event.get("type")), data or {}, payload_of(event))

    def quote(self, text: str | None = None) -> Evidence:
        return Evidence("events.jsonl", self.line, _clip(text or f"{self.type} {self.raw}"))


def _logged(record: RunRecord, *types: str) -> list[_Logged]:
    return [_Logged.of(e) for e in record.events if e.get("type") in types]


def _grader_evidence(sub: Submission, grader_log: list[str], room: int
                     ) -> list[tuple[str, Evidence]]:
    pattern = _submission_pattern(sub.id)
    out = []
    for lineno, line in enumerate(grader_log, start=1):
        if len(out) >= room:
            break
        if pattern.search(line) and re.search(r"error|fail|invalid|traceback|timeout|"
                                              r"refus|duplicate|copy", line, re.IGNORECASE):
            out.append((line, Evidence("logs/grader.log", lineno, _clip(line))))
    return out


def _submission_failure(record: RunRecord, sub: Submission, grader_log: list[str]) -> Failure:
    """Why one submission is invalid (or a copy of the base model), with the evidence."""
    evidence: list[Evidence] = []
    texts = []
    if sub.error:
        texts.append(sub.error)
        evidence.append(Evidence("events.jsonl", sub.scored_line, _clip(sub.error)))
    result = ResultFile.of(record.result(sub.result_file)) if sub.result_file else None
    error = result.error if result else None
    if error and error != sub.error:
        texts.append(str(error))
        for line in str(error).splitlines()[-3:]:
            evidence.append(Evidence(str(sub.result_file), None, _clip(line)))
    for line, quoted in _grader_evidence(sub, grader_log, MAX_EVIDENCE - len(evidence)):
        texts.append(line)
        evidence.append(quoted)
    if sub.base_copy:
        category = "base_copy"
    elif not sub.scored:
        category = "never_scored"
    elif sub.duplicate_of and not sub.error:
        category = "duplicate"
    else:
        category = category_of(sub.code, "\n".join(texts))
    if sub.base_copy and not evidence:
        evidence.append(Evidence("events.jsonl", sub.scored_line,
                                 f"duplicate_of={sub.duplicate_of}"))
    return Failure(category, _clip(sub.error or texts[0] if texts else LABELS[category]),
                   tuple(evidence[:MAX_EVIDENCE]), sub.id)


def _no_valid_submission(record: RunRecord, submissions: list[Submission]) -> Failure:
    evidence = [e.quote() for e in _logged(record, "deadline_reached", "agent_exited",
                                           "run_finished")]
    copies = any(s.valid and s.base_copy for s in submissions)
    return Failure("no_submission", f"{len(submissions)} submission(s), none valid"
                   + (" apart from copies of the base model" if copies else ""),
                   tuple(evidence[:MAX_EVIDENCE]))


def _agent_crashes(record: RunRecord) -> list[Failure]:
    """Each agent_exited event with a non-zero code that the deadline did not cause."""
    out = []
    for event in _logged(record, "agent_exited"):
        exited = event.payload
        if not isinstance(exited, AgentExited) or exited.returncode in (0, None) or \
                exited.reason in ("deadline", "killed_at_deadline"):
            continue
        agent_log = _log_lines(record.root, "agent.log")
        hits = [(n, line) for n, line in enumerate(agent_log, start=1)
                if re.search(r"Traceback|Error|error:|Killed", line)]
        evidence = [event.quote()] + [Evidence("logs/agent.log", n, _clip(line))
                                      for n, line in hits[-(MAX_EVIDENCE - 1):]]
        out.append(Failure("agent_crashed", f"agent exited with return code {exited.returncode}"
                           + (f" ({exited.reason})" if exited.reason else ""), tuple(evidence)))
    return out


def _refusals(grader_log: list[str]) -> list[Failure]:
    """The requests the grader refused, one entry per kind."""
    out = []
    for category, pattern in SERVICE_REFUSALS:
        hits = [(n, line) for n, line in enumerate(grader_log, start=1) if pattern.search(line)]
        if hits:
            out.append(Failure(category, f"{len(hits)} request(s) refused by the grader",
                               tuple(Evidence("logs/grader.log", n, _clip(line))
                                     for n, line in hits[:MAX_EVIDENCE])))
    return out


def analyse_failures(record: RunRecord, submissions: list[Submission]) -> list[Failure]:
    """The report's failure list: each invalid submission, then the run-level failures."""
    grader_log = _log_lines(record.root, "grader.log")
    failures = [_submission_failure(record, sub, grader_log) for sub in submissions
                if not sub.valid or sub.base_copy]
    if not any(s.valid and not s.base_copy for s in submissions):
        failures.append(_no_valid_submission(record, submissions))
    failures += _agent_crashes(record)
    failures = _run_status(record, failures)
    failures += _driver(record)
    failures += _refusals(grader_log)
    return failures


def _tail_evidence(record: RunRecord) -> list[Evidence]:
    tail = record.info.agent_log_tail
    if not isinstance(tail, list):
        return []
    lines = [str(line) for line in tail if str(line).strip()]
    return [Evidence("run.json agent_log_tail", None, _clip(line))
            for line in lines[-(MAX_EVIDENCE - 1):]]


def _first(failures: list[Failure], category: str) -> int | None:
    return next((i for i, f in enumerate(failures) if f.category == category), None)


def _run_status(record: RunRecord, failures: list[Failure]) -> list[Failure]:
    """The run statuses that say how the agent ended (a2c.contracts.run_info): `agent_failed`
    (it exited non-zero) and `no_submission` (it never submitted), with the last lines of its
    log that run.json keeps."""
    status = record.info.status
    tail = tuple(_tail_evidence(record))
    out = list(failures)
    if status == RunStatus.AGENT_FAILED:
        crashed = _first(out, "agent_crashed")
        if crashed is None:
            exit_info = record.info.agent_exit
            code = exit_info.returncode if exit_info else None
            out.append(Failure("agent_crashed", "run status agent_failed: the agent exited "
                               "with an error" + (f" (return code {code})" if code is not None
                                                  else ""), tail[:MAX_EVIDENCE]))
        elif tail:
            entry = out[crashed]
            out[crashed] = replace(entry, evidence=(entry.evidence + tail)[:MAX_EVIDENCE
                                                                          + len(tail)])
    elif status == RunStatus.NO_SUBMISSION:
        index = _first(out, "no_submission")
        if index is not None:
            out[index] = replace(out[index], evidence=out[index].evidence + tail,
                                 message="run status no_submission: the agent never submitted")
    return out


def _driver(record: RunRecord) -> list[Failure]:
    """The driver gateway's refusals and errors: a spent driver budget (each
    `driver_budget_exhausted` event), and calls answered with an error (an upstream down or
    failing, a refused model or key), counted by error."""
    out = []
    for event in _logged(record, "driver_budget_exhausted"):
        spent = event.payload
        if not isinstance(spent, DriverBudgetExhausted):
            continue
        out.append(Failure("driver_budget", f"{spent.limit}: {spent.used} used of "
                           f"{spent.budget}; later calls were refused",
                           (event.quote(),)))
    errors = [e for e in _logged(record, "driver_call") if isinstance(e.payload, DriverCall)
              and (e.payload.error or _status(e.payload.status) >= 400)]
    if not errors:
        return out
    kinds: dict[str, int] = {}
    for event in errors:
        kind = str(event.payload.error or f"HTTP {event.payload.status}")
        kinds[kind] = kinds.get(kind, 0) + 1
    out.append(Failure("driver_errors", f"{len(errors)} call(s): " + ", ".join(
        f"{k} ×{n}" for k, n in sorted(kinds.items())),
        tuple(e.quote(f"driver_call seq {e.payload.seq} status {e.payload.status} "
                      f"{e.payload.error or ''}") for e in errors[:MAX_EVIDENCE])))
    return out


def _status(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
