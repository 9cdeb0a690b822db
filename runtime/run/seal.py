"""Sealing a run's record: the last event of a run is `record_sealed`, the digests of every file a
report reads (a2c.contracts.seal), authenticated like every event by the operator's record key.

Called by the runner once the run's files are final: at the end of `finish` and of `_abort` (and
so again at the end of each resume, which supersedes the earlier seal).
"""

from __future__ import annotations

from typing import Any

from a2c.contracts.events import RecordSealed
from a2c.contracts.seal import record_digests


def seal_record(ctx: Any, reason: str = "finished") -> dict:
    """Append `record_sealed` for `ctx` (a RunContext) and return the event."""
    return ctx.events.emit(RecordSealed(reason=str(reason), files=record_digests(ctx.run_dir)))
