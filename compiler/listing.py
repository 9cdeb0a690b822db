"""`a2c list`: the tasks and agents under a specs folder, one typed row each, read from their
resolved specs (the same `TaskSpec`/`AgentSpec` a bundle holds), so the CLI only prints them.

A spec that does not load is not a row: its problems are returned beside the rows, and the
command prints them after the tables (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from a2c.compiler.build import human_duration, load_all
from a2c.compiler.load import discover
from a2c.compiler.resolve import resolve
from a2c.contracts.records import Record
from a2c.contracts.spec import AgentSpec, TaskSpec
from a2c.errors import SpecError


@dataclass
class TaskRow(Record):
    """One task as `a2c list` shows it (and `--json` writes it)."""

    id: str = ""
    level: int = 1
    grader: str = ""
    base_model: str | None = None     # the hub id, the builtin name or the folder
    wall_clock: str = ""              # human: 12h, 90s
    gpus: int = 0
    max_submissions: int = 0
    title: str = ""

    @classmethod
    def of(cls, task: TaskSpec) -> TaskRow:
        model = task.base_model
        budget = task.budget
        return cls(id=task.id, level=task.level, grader=task.grader.kind,
                   base_model=model.hub or model.builtin or model.path,
                   wall_clock=human_duration(budget.wall_clock_s), gpus=budget.gpus,
                   max_submissions=budget.max_submissions, title=task.title)


@dataclass
class AgentRow(Record):
    """One agent as `a2c list` shows it (and `--json` writes it)."""

    id: str = ""
    type: str = ""
    title: str = ""
    driver: str | None = None          # the default driver, if any
    transcript: str = ""               # its transcript's format

    @classmethod
    def of(cls, agent: AgentSpec) -> AgentRow:
        return cls(id=agent.id, type=agent.type, title=agent.title,
                   driver=agent.driver.default, transcript=agent.transcript.format)


@dataclass
class SpecListing:
    tasks: list[TaskRow] = field(default_factory=list)
    agents: list[AgentRow] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)   # of the specs that did not load

    def to_dict(self) -> dict[str, list[dict]]:
        """`a2c list --json`'s object."""
        return {"tasks": [row.to_dict() for row in self.tasks],
                "agents": [row.to_dict() for row in self.agents]}


def list_specs(specs_dir: str | Path | None = None) -> SpecListing:
    """Every task and agent spec under `specs_dir` (default: specs/), in discovery order."""
    listing = SpecListing()
    for path in discover(specs_dir):
        try:
            doc = load_all([path])[0]
        except SpecError as exc:
            listing.problems.extend(exc.problems)
            continue
        if doc.kind == "Task":
            listing.tasks.append(TaskRow.of(TaskSpec.from_dict(resolve(doc))))
        elif doc.kind == "Agent":
            listing.agents.append(AgentRow.of(AgentSpec.from_dict(resolve(doc))))
    return listing
