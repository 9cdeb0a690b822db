"""Which of the grader's copies of submissions are kept, and removing the rest once scored.

Why: every submission is copied into `grader/submissions/<n>/` at submit (intake.py), so a run
that submits a 541 MB model ten times would hold 5.4 GB of copies, most of which can never be read
again. A copy is read again only to evaluate it (queued or running), for the final split (the
submission the scoring policy counts: the best valid feedback score, the earliest on a tie, or
the last valid one) or by a duplicate that points at it. Everything else is removed as soon as a
score comes in. What was scored stays on the record: the journal keeps the submission's folder
hash and the `submission_pruned` event names the id, the hash and the bytes freed, so `a2c
verify` (which never reads the copies) and the final split are unchanged.

Both policies' candidates (best and last) are kept, so the choice of policy never depends on a
copy that is gone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from a2c.runtime.grader_service.submission import Submission


def copies_to_keep(subs: dict[int, Submission]) -> set[int]:
    """Ids whose copy may still be read: queued or running, the best valid score (earliest on a
    tie), the last valid one, and the original each of those duplicates."""
    keep = {sid for sid, sub in subs.items() if sub.pending}
    valid = [sid for sid in sorted(subs) if subs[sid].counts]
    if valid:
        best = max(float(subs[sid].score or 0) for sid in valid)
        keep.add(next(sid for sid in valid if float(subs[sid].score or 0) == best))
        keep.add(valid[-1])
    for sid in list(keep):
        seen: set[int] = set()
        while sid in subs and sid not in seen:
            seen.add(sid)
            keep.add(sid)
            original = subs[sid].duplicate_of
            if not isinstance(original, int):
                break
            sid = original
    return keep


def tree_bytes(path: Path) -> int:
    """Bytes the files under `path` hold (their sizes; a copy is never sparse)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def prunable(subs: dict[int, Submission], copy_path) -> list[int]:
    """Ids whose copy exists and is no longer needed (see copies_to_keep)."""
    keep = copies_to_keep(subs)
    return [sid for sid in sorted(subs) if sid not in keep and copy_path(sid).exists()]
