"""One trial of a suite: what the compiler writes into `suite.json` and `a2c sweep` runs.

A trial is one `a2c run`: a task bundle, an agent bundle, a driver (or none), a mode, a seed and
the suite's overrides (budget, base model, backend). Its id is derived from that content — the
two bundle *digests*, not their names — so that a sweep resumes by id: a trial whose task or agent
compiles differently gets a new id (and a fresh run), an unchanged one finds its old run directory.
The group a trial was listed in is not part of its content: the same run listed by two groups is
one trial.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from a2c.canonical import sha256_json
from a2c.contracts.records import Record
from a2c.contracts.spec import SuiteBudgetSpec

ID_HASH_CHARS = 10
_UNSAFE = re.compile(r"[^a-z0-9_-]+")


def trial_content(task_digest: str, agent_digest: str, driver: str | None, mode: str,
                  seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """The content a trial id is the hash of (overrides with unset keys dropped)."""
    return {"task_digest": task_digest, "agent_digest": agent_digest, "driver": driver,
            "mode": mode, "seed": int(seed),
            "overrides": {k: v for k, v in sorted(overrides.items()) if v not in (None, {})}}


def slug(text: str) -> str:
    """A driver or id as a file-name part: `openai/gpt-5-codex` → `openai-gpt-5-codex`."""
    return _UNSAFE.sub("-", text.lower()).strip("-")[:40] or "x"


def trial_id(task: str, agent: str, content: dict[str, Any]) -> str:
    """`<task>-<agent>[-<driver>]-<mode>-s<seed>-<hash>`: readable in a runs folder, unique by
    the hash of the content (the readable part is only a label)."""
    parts = [slug(task), slug(agent)]
    if content.get("driver"):
        parts.append(slug(content["driver"]))
    parts += [content["mode"], f"s{content['seed']}",
              sha256_json(content)[:ID_HASH_CHARS]]
    return "-".join(parts)


@dataclass
class TrialOverrides(Record):
    """A trial's `overrides` read (the dict stays as written: the trial id is its hash): the
    suite's budget overrides, base model, backend (None: local) and agent params."""

    budget: SuiteBudgetSpec = field(default_factory=SuiteBudgetSpec)
    base_model: Any = None
    backend: str | None = None   # the sandbox backend (None: local)
    agent_params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialOverrides:
        read = super().from_dict(data)
        read.budget = SuiteBudgetSpec.from_dict(data.get("budget") or {})
        read.agent_params = dict(read.agent_params or {})
        return read


@dataclass
class Trial(Record):
    """A trial as suite.json lists it (`suite.trials[]`)."""

    id: str = ""
    group: str = ""
    task: str = ""
    agent: str = ""
    driver: str | None = None
    mode: str = "free"
    seed: int = 0
    task_digest: str = ""
    agent_digest: str = ""
    # budget (wall_clock_s, driver_*, cpus, eval_cpus, eval_gpus, gpus), base_model, backend
    overrides: dict[str, Any] = field(default_factory=dict)
    # what Ray is asked for: {"agent": {"CPU": .., "GPU": ..}, "grader": {...}}
    resources: dict[str, dict[str, float]] = field(default_factory=dict)
    wall_clock_s: float | None = None

    @property
    def given(self) -> TrialOverrides:
        """The overrides, typed."""
        return TrialOverrides.from_dict(self.overrides or {})

    @property
    def agent_resources(self) -> dict[str, float]:
        """The agent's placement bundle ({"CPU": .., "GPU": ..}, Ray's names); {} when unset."""
        return dict((self.resources or {}).get("agent") or {})

    @property
    def grader_resources(self) -> dict[str, float]:
        """The grader's placement bundle (its evaluation device); {} when unset."""
        return dict((self.resources or {}).get("grader") or {})
