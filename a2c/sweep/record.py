"""`sweep.json` in the runs folder: every trial, its run directory and status, rewritten
atomically on every change, so `a2c view` (and a maintainer's `jq`) read a sweep while it runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from a2c.fsutil import write_json_atomic
from a2c.timefmt import iso_utc

from .plan import TrialPlan

SWEEP_FILE = "sweep.json"
SWEEP_FORMAT = "a2c-sweep/1"
STATUSES = ("queued", "running", "finished", "failed")


class SweepRecord:
    def __init__(self, runs_dir: Path, suite: dict[str, Any], digest: str,
                 plans: list[TrialPlan], address: str | None):
        self.path = runs_dir / SWEEP_FILE
        self.data: dict[str, Any] = {
            "format": SWEEP_FORMAT, "suite": suite["id"], "title": suite.get("title"),
            "suite_digest": digest, "address": address or "local", "started_at": iso_utc(time.time()),
            "ended_at": None, "leaderboard": None,
            "trials": [{"id": p.id, "group": p.trial.group, "task": p.trial.task,
                        "agent": p.trial.agent, "driver": p.trial.driver, "mode": p.trial.mode,
                        "seed": p.trial.seed, "run_dir": str(p.run_dir),
                        "resources": p.trial.resources, "status": "queued", "reason": None,
                        "skipped": False, "best_score": None, "baseline_score": None,
                        "attempts": 0} for p in plans]}
        self.index = {t["id"]: t for t in self.data["trials"]}

    def update(self, trial_id: str, **values: Any) -> None:
        self.index[trial_id].update(values)
        self.save()

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for t in self.data["trials"]:
            out[t["status"]] = out.get(t["status"], 0) + 1
        return out

    def best_by_task(self) -> dict[str, float | None]:
        best: dict[str, float | None] = {}
        for t in self.data["trials"]:
            score = t.get("best_score") if t["status"] == "finished" else None
            current = best.get(t["task"])
            best[t["task"]] = score if current is None or (score is not None and score > current) \
                else current
        return best

    def save(self) -> None:
        self.data["counts"] = self.counts()
        self.data["updated_at"] = iso_utc(time.time())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.data)
