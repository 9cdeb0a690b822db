"""The limits on submissions: the deadline, the number of submissions, the interval between two.
`current_limits` reports them (GET /time, /submissions); `check_limits` refuses a submission."""

from __future__ import annotations

from dataclasses import dataclass

from a2c.contracts.records import Record
from a2c.contracts.service_config import ServiceConfig
from a2c.runtime.grader_service.common import Refusal


@dataclass
class Limits(Record):
    """The answer of GET /time (and part of /submissions): what is left of the run's limits."""

    deadline: float | None = None
    remaining_s: float | None = None
    submissions_left: int | None = None
    max_submissions: int | None = None
    min_interval_s: float = 0.0
    next_submission_in_s: float = 0.0
    now: float = 0.0
    queued: int = 0


def current_limits(cfg: ServiceConfig, used: int, last_received_unix: float | None,
                   queued: int, now: float) -> Limits:
    remaining = None if cfg.deadline_unix is None else max(0.0, cfg.deadline_unix - now)
    left = None if cfg.max_submissions is None else max(0, cfg.max_submissions - used)
    wait = 0.0
    if cfg.min_interval_s and last_received_unix is not None:
        wait = max(0.0, last_received_unix + cfg.min_interval_s - now)
    return Limits(deadline=cfg.deadline_unix, remaining_s=remaining, submissions_left=left,
                  max_submissions=cfg.max_submissions, min_interval_s=cfg.min_interval_s,
                  next_submission_in_s=round(wait, 3), now=now, queued=queued)


def check_limits(cfg: ServiceConfig, used: int, last_received_unix: float | None,
                 stopping: bool, now: float) -> None:
    if stopping:
        raise Refusal(503, "unavailable", "the grader service is shutting down")
    if cfg.deadline_unix is not None and now >= cfg.deadline_unix:
        raise Refusal(410, "deadline_passed",
                      f"the deadline passed {now - cfg.deadline_unix:.0f} s ago; "
                      "no more submissions are accepted", limit=cfg.deadline_unix)
    if cfg.max_submissions is not None and used >= cfg.max_submissions:
        raise Refusal(429, "submission_limit",
                      f"all {cfg.max_submissions} submissions of this run are used",
                      limit=cfg.max_submissions, used=used)
    if cfg.min_interval_s and last_received_unix is not None:
        wait = last_received_unix + cfg.min_interval_s - now
        if wait > 0:
            raise Refusal(409, "too_soon",
                          f"submissions must be at least {cfg.min_interval_s:g} s apart; "
                          f"retry in {wait:.1f} s", limit=cfg.min_interval_s,
                          retry_after_s=round(wait, 3))
