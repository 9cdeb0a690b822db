"""An ALFWorld game's `traj_data.json` (ALFRED's metadata beside each `game.tw-pddl`), typed:
what a2c reads of it — the task type (the ReAct prompt family; which games a split lists), the
task's annotations (a record's prompt) and the ids the slim copy keeps.

Why a record: the generator read the file in two places and the environment in a third, each
for the same `task_type`; it is parsed here once per read (standard library only: the
environment, which the agent's sandbox imports, reads it too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE = "traj_data.json"


@dataclass(frozen=True)
class TrajData:
    """`task_type`, `task_id`, `pddl_params` as the file holds them, and `task_descs`: the
    annotators' task descriptions in order (at least one, "" when the file has none)."""

    task_type: str | None = None
    task_id: str | None = None
    pddl_params: Any = None
    task_descs: tuple[str, ...] = ("",)

    @classmethod
    def read(cls, path: Path) -> TrajData:
        """OSError or ValueError when the file cannot be read as JSON."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        anns = (data.get("turk_annotations") or {}).get("anns") or [{}]
        return cls(task_type=data.get("task_type"), task_id=data.get("task_id"),
                   pddl_params=data.get("pddl_params"),
                   task_descs=tuple(a.get("task_desc", "") for a in anns))

    def slim(self) -> dict[str, Any]:
        """The copy the generator writes beside a game: the ids, the annotations' texts."""
        return {"task_id": self.task_id, "task_type": self.task_type,
                "pddl_params": self.pddl_params,
                "turk_annotations": {"anns": [{"task_desc": d} for d in self.task_descs]}}
