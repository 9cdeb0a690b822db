"""The resource limits a run asked the local backend for, each saying whether its cgroup
enforces it and why not (run.json's `limits`: cgroups.py fills them in as it makes the cgroup).

A typed record rather than a name-keyed mapping: the cgroup code sets and reads each limit by
name, and a misspelt key would have been a silent miss.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Limit:
    asked: str | float | int
    enforced: bool = False
    why: str | None = None

    def record(self) -> dict:
        out: dict = {"asked": self.asked, "enforced": self.enforced}
        if self.why:
            out["why"] = self.why
        return out


@dataclass
class Limits:
    """The limits a run asked for (None: not asked), each saying whether it is enforced."""

    memory: Limit | None = None
    cpus: Limit | None = None
    pids: Limit | None = None

    @classmethod
    def asked(cls, memory: str | None, cpus: float | None, pids: int | None) -> Limits:
        return cls(memory=Limit(memory) if memory else None, cpus=Limit(cpus) if cpus else None,
                   pids=Limit(pids) if pids else None)

    def items(self) -> list[tuple[str, Limit]]:
        """(name, limit) of those asked, in run.json's order: memory, cpus, pids."""
        return [(name, limit) for name, limit in (("memory", self.memory), ("cpus", self.cpus),
                                                  ("pids", self.pids)) if limit is not None]
