"""Checking a model's claims about a run against the run's record.

A written analysis (`a2c report --narrate`, `a2c review`) is only as good as its evidence, so
every claim carries citations and each one is resolved here, never trusted:

  {"kind": "event",      "ref": 12,                 "quote": "submission_scored"}
  {"kind": "submission", "ref": "3",                "quote": "0.42"}
  {"kind": "command",    "ref": 7,                  "quote": "python train_sft.py"}
  {"kind": "file",       "ref": "<commit>:<path>",  "quote": "learning_rate=5e-5"}

`ref` names the evidence: an event's index in events.jsonl (0-based, as the digest numbers it),
a submission id, a line of logs/commands.log (1-based), a file of a code snapshot (a commit of
RUN/snapshots.git, abbreviated or whole, and a path). The citation is *verified* when the
evidence exists and the quote appears in it (case and whitespace normalised); otherwise it is
*unverifiable* and says why. A claim is verified when it has citations and all of them are.

Each resolved citation also says who wrote what it quotes (`author`): the runtime (events, the
grader's verdicts) or the agent under evaluation (its code snapshots, its command log, and the
fields of a record it chose: a submission's note and model path). A quote of agent-written text
is labelled so (`AGENT_LABEL`): it proves only that the agent wrote it, never that it is true, and
it never makes a claim about an outcome verified (analysis/claims.py checks those against the
record's own facts).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.records import Record
from a2c.contracts.run_paths import RunPaths

from .checked_claims import (
    FALSE,
    UNVERIFIABLE,
    VERIFIED,
    CheckedCitation,
    CheckedClaim,
    StatedCitation,
    StatedClaim,
)
from .record import RunRecord
from .snapshots import SnapshotRepo

KINDS = ("event", "submission", "command", "file")
AGENT_KINDS = ("command", "file")        # logs/commands.log and the snapshots: the agent's text
AGENT_FIELDS = ("note", "model_path")    # fields of an event (or a submission) the agent chose
AGENT_LABEL = "agent-written: supports only that the agent wrote this"


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().lower()


def event_text(event: dict[str, Any], runtime_only: bool = False) -> str:
    """What an event says, as the digest shows it and a quote is matched against (without the
    fields the agent chose, `runtime_only`)."""
    data = {k: v for k, v in (event.get("data") or {}).items()
            if not (runtime_only and k in AGENT_FIELDS)}
    return f"{event.get('type')} {json.dumps(data, sort_keys=True, ensure_ascii=False)}"


def _line(text: Any) -> str:
    return " ".join(str(text).split())      # one line: a note cannot start a part of the digest


def submission_text(sub, runtime_only: bool = False) -> str:
    """A submission as the digest shows it; its note (the agent's) last, unless `runtime_only`."""
    status = "valid" if sub.valid else ("invalid" if sub.scored else "not scored")
    text = f"submission {sub.id} {status} score {sub.score} error {_line(sub.error or '-')}"
    return text if runtime_only else f"{text} note {_line(sub.note or '-')}"


class Evidence:
    """The record's evidence, loaded lazily, with one resolver per citation kind."""

    def __init__(self, run_dir: str | Path, record: RunRecord | None = None):
        self.root = Path(run_dir)
        self.record = record or RunRecord.load(self.root)
        self._commands: list[str] | None = None
        self._repo: SnapshotRepo | None = None

    @property
    def commands(self) -> list[str]:
        if self._commands is None:
            log = RunPaths(self.root).commands_log
            self._commands = log.read_text(encoding="utf-8", errors="replace").splitlines() \
                if log.is_file() else []
        return self._commands

    @property
    def repo(self) -> SnapshotRepo:
        if self._repo is None:
            self._repo = SnapshotRepo(RunPaths(self.root).snapshots)
        return self._repo

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()

    def target(self, kind: str, ref: Any) -> tuple[str | None, str]:
        """(the text the citation points at, or None; why not)."""
        text, _, why = self._resolve(kind, ref)
        return text, why

    def _resolve(self, kind: str, ref: Any) -> tuple[str | None, str | None, str]:
        """(the text cited, or None; the part of it the runtime wrote, None when the agent wrote
        all of it; why not found)."""
        if kind == "event":
            index = _int(ref)
            if index is None or not 0 <= index < len(self.record.events):
                return None, None, f"no event {ref!r} (the record has {len(self.record.events)})"
            event = self.record.events[index]
            return event_text(event), event_text(event, runtime_only=True), ""
        if kind == "submission":
            sub = next((s for s in self.record.submissions if s.id == str(ref).strip()), None)
            if sub is None:
                return None, None, f"no submission {ref!r}"
            return submission_text(sub), submission_text(sub, runtime_only=True), ""
        text, why = self._agent_target(kind, ref)
        return text, None, why

    def _agent_target(self, kind: str, ref: Any) -> tuple[str | None, str]:
        if kind == "command":
            line = _int(ref)
            if line is None or not 1 <= line <= len(self.commands):
                return None, f"no line {ref!r} in logs/commands.log ({len(self.commands)} lines)"
            return self.commands[line - 1], ""
        if kind == "file":
            commit, _, path = str(ref).partition(":")
            if not path or not self.repo.available:
                return None, f"{ref!r} is not COMMIT:PATH of a code snapshot"
            full = self.repo.resolve(commit.strip())
            if full is None:
                return None, f"no snapshot commit {commit!r}"
            blob = self.repo.files(full).get(path.strip().lstrip("/"))
            if blob is None:
                return None, f"no file {path!r} in snapshot {commit[:12]}"
            text = self.repo.text(blob)
            return (None, f"{path} is binary or too large") if text is None else (text, "")
        return None, f"unknown citation kind {kind!r} (use {', '.join(KINDS)})"

    def check(self, citation: Any) -> CheckedCitation:
        """The citation with `status` (verified | unverifiable) and, when unverifiable, `why`.
        `citation` is the model's answer as parsed ({kind, ref, quote})."""
        if not isinstance(citation, dict):
            return CheckedCitation(None, None, str(citation),
                                   why="not a {kind, ref, quote} object")
        stated = StatedCitation.from_dict(citation)
        out = CheckedCitation(stated.kind, stated.ref, str(stated.quote or ""))
        text, runtime, why = self._resolve(str(out.kind), out.ref)
        quote = normalise(out.quote)
        if text is not None and not quote:
            why = "no quote: nothing to check the claim against"
        elif text is not None and quote not in normalise(text):
            why = "the quote is not in what it cites"
        elif text is not None:
            out.status = VERIFIED
            if runtime is not None and quote in normalise(runtime):
                out.author = "runtime"
            else:
                out.author, out.label = "agent", AGENT_LABEL
            return out
        out.why = why
        return out

    def check_claim(self, claim: Any) -> CheckedClaim:
        """A claim {text, citations} (the model's answer as parsed) with each citation checked
        and the claim's `status`."""
        stated = StatedClaim.of(claim)
        cites = stated.citations
        checked = [self.check(c) for c in (cites if isinstance(cites, list) else [])]
        ok = bool(checked) and all(c.verified for c in checked)
        out = CheckedClaim(text=str(stated.text or ""), citations=checked,
                           status=VERIFIED if ok else UNVERIFIABLE)  # nothing else it said
        if not checked:
            out.why = "cites no evidence"
        elif not ok:
            out.why = "; ".join(f"{c.kind} {c.ref}: {c.why}" for c in checked if not c.verified)
        return out


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*[A-Za-z#]?(\d+)\s*", str(value))
    return int(m.group(1)) if m else None


@dataclass
class Tally(Record):
    """How many claims the record verified, contradicted (false), and could not check (the
    `checked` of narrative.json and review.json)."""

    claims: int = 0
    verified: int = 0
    false: int = 0
    unverifiable: int = 0


def tally(statuses: list[str]) -> Tally:
    """The tally of the claims' (or verdicts') statuses."""
    verified, false = statuses.count(VERIFIED), statuses.count(FALSE)
    return Tally(claims=len(statuses), verified=verified, false=false,
                 unverifiable=len(statuses) - verified - false)
