"""The run's scores as the grader's journal records them (`a2c.contracts.journal`), by the
task's scoring policy: one typed `RunScores`, so the runner sets run.json's fields by name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from a2c.contracts.grade_result import read_result
from a2c.contracts.journal import JournalScored, journal_state
from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths


def sort_key(sid: str):
    return (0, int(sid)) if sid.isdigit() else (1, sid)


def pending(run_dir: Path) -> list[str]:
    """The submissions received and not scored yet, in order."""
    return journal_state(run_dir)["pending"]


def scored_entries(run_dir: Path, state: dict | None = None) -> list[tuple[str, JournalScored]]:
    """The journal's scored submissions, typed, in submission order (`state`: the journal
    already read, `journal_state`'s)."""
    state = journal_state(run_dir) if state is None else state
    # (an entry without `valid` is a valid one, as the journal's first writers left it out)
    return [(sid, JournalScored.from_dict({"valid": True, **entry}))
            for sid, entry in sorted(state["scored"].items(), key=lambda kv: sort_key(kv[0]))]


@dataclass(frozen=True)
class RunScores:
    """What the journal says of the run so far; `final_score` by the task's policy."""

    submissions: int = 0
    valid_submissions: int = 0
    best_score: float | None = None
    final_score: float | None = None
    best_submission: str | None = None
    copies_of_base: int = 0
    scored: int = 0
    pending: tuple[str, ...] = ()

    def apply_to(self, run: RunInfo) -> None:
        """run.json's score fields, from these."""
        run.submissions, run.valid_submissions = self.submissions, self.valid_submissions
        run.best_score, run.final_score = self.best_score, self.final_score
        run.best_submission, run.copies_of_base = self.best_submission, self.copies_of_base


def score_run(run_dir: Path, policy: str) -> RunScores:
    state = journal_state(run_dir)
    scored = scored_entries(run_dir, state)
    valid = [(sid, e) for sid, e in scored if e.valid and e.score is not None]
    best = max((float(e.score) for _, e in valid), default=None)
    last = float(valid[-1][1].score) if valid else None
    best_id = None
    if best is not None:
        best_id = next(sid for sid, e in valid if float(e.score) == best)
    return RunScores(submissions=len(state["received"]), valid_submissions=len(valid),
                     best_score=best, final_score=last if policy == "last" else best,
                     best_submission=best_id, scored=len(scored),
                     pending=tuple(state["pending"]),
                     copies_of_base=sum(1 for _, e in scored if e.copy_of_base))


def baseline_score(run_dir: Path) -> float | None:
    path = RunPaths(run_dir).baseline_result
    if not path.is_file():
        return None
    data = read_result(path)
    if data.get("valid") is False:
        return None
    return data.get("score")
