"""A suite's matrix → its list of trials (pure: no files read, no digests).

The language is a CI matrix: axes task × agent × driver × mode × seed; `drivers` is either a list
crossed with every `cli` agent or a mapping `agent: [drivers]` that pairs each scaffold with its
own; `include` adds combinations (an axis it leaves out takes every value of its group), `exclude`
drops every combination that matches all keys of one entry. A suite is one grid (`main`) or
several named `groups`, each inheriting the top level's axes and overrides (`agent_params`, an
agent's param overrides, merge per agent and param). The compiler's checks
and its build call the same `expand`, so what `a2c validate` refuses is exactly what `a2c build`
would have listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2c.modes import FREE

AXES = ("tasks", "agents", "drivers", "modes", "seeds")
MATRIX_KEYS = (*AXES, "include", "exclude", "budget", "base_model", "backend", "agent_params")
MAIN = "main"


@dataclass
class Cell:
    """One expanded combination, with where it came from (a spec path, for file:line:col)."""

    group: str
    task: str
    agent: str
    driver: str | None
    mode: str
    seed: int
    where: dict[str, tuple] = field(default_factory=dict)   # axis -> path in the document

    def key(self) -> tuple:
        return (self.task, self.agent, self.driver, self.mode, self.seed)


def groups_of(data: dict[str, Any]) -> dict[str, tuple[tuple, dict[str, Any]]]:
    """{group name: (its path prefix, its matrix with the top level's keys filled in)}."""
    top = {k: data[k] for k in MATRIX_KEYS if k in data}
    if not data.get("groups"):
        return {MAIN: ((), top)}
    out = {}
    for name, group in data["groups"].items():
        merged = dict(top)
        for key, value in group.items():
            if key == "budget":
                merged["budget"] = {**(top.get("budget") or {}), **value}
            elif key == "agent_params":   # per agent, param by param over the top level's
                top_params = top.get("agent_params") or {}
                merged[key] = {**top_params, **{a: {**(top_params.get(a) or {}), **(v or {})}
                                                for a, v in value.items()}}
            else:
                merged[key] = value
        out[name] = (("groups", name), merged)
    return out


def _origin(prefix: tuple, data: dict[str, Any], group: dict[str, Any], key: str) -> tuple:
    """The document path of a group's key: in the group if it sets it, else the top level's."""
    if prefix and key in (data.get("groups") or {}).get(prefix[-1], {}):
        return (*prefix, key)
    return (key,)


def drivers_for(agent: str, agent_type: str | None, drivers: Any) -> list[str | None]:
    """The drivers an agent runs with: none for a reference agent, the mapping's list for a paired
    agent, the crossed list for any other `cli` agent, else its default driver (None)."""
    if agent_type == "reference":
        return [None]
    if isinstance(drivers, dict):
        return list(drivers.get(agent) or [None])
    return list(drivers or [None])


def expand(data: dict[str, Any], agent_types: dict[str, str | None]) -> list[Cell]:
    """Every combination of every group, in spec order, excluded ones removed; a combination
    listed twice in one group is kept once. (Across groups duplicates stay: the build merges
    them by trial id.)"""
    cells: list[Cell] = []
    for name, (prefix, g) in groups_of(data).items():
        where = {axis: _origin(prefix, data, g, axis) for axis in (*AXES, "include")}
        modes = list(g.get("modes") or [FREE])
        seeds = list(g.get("seeds") or [0])
        drivers = g.get("drivers")
        found: dict[tuple, Cell] = {}       # a combination listed twice in a group: once

        def add(cell: Cell, found: dict[tuple, Cell] = found) -> None:
            found.setdefault(cell.key(), cell)

        for ti, task in enumerate(g.get("tasks") or []):
            for ai, agent in enumerate(g.get("agents") or []):
                for driver in drivers_for(agent, agent_types.get(agent), drivers):
                    for mi, mode in enumerate(modes):
                        for seed in seeds:
                            add(Cell(name, task, agent, driver, mode, int(seed),
                                     {"task": (*where["tasks"], ti),
                                      "agent": (*where["agents"], ai),
                                      "mode": (*where["modes"], mi) if "modes" in g
                                      else (*where["tasks"], ti)}))
        for ii, inc in enumerate(g.get("include") or []):
            at = (*where["include"], ii)
            inc_drivers = [inc["driver"]] if "driver" in inc else drivers_for(
                inc["agent"], agent_types.get(inc["agent"]), drivers)
            inc_modes = [inc["mode"]] if "mode" in inc else modes
            inc_seeds = [inc["seed"]] if "seed" in inc else seeds
            for driver in inc_drivers:
                for mode in inc_modes:
                    for seed in inc_seeds:
                        add(Cell(name, inc["task"], inc["agent"], driver, mode, int(seed),
                                 {"task": (*at, "task"), "agent": (*at, "agent"),
                                  "mode": (*at, "mode") if "mode" in inc else at,
                                  "driver": (*at, "driver") if "driver" in inc else at}))
        excludes = g.get("exclude") or []
        cells += [c for c in found.values() if not any(_matches(c, ex) for ex in excludes)]
    return cells


def _matches(cell: Cell, entry: dict[str, Any]) -> bool:
    return all(getattr(cell, key) == value for key, value in entry.items())


def group_titles(data: dict[str, Any]) -> dict[str, str | None]:
    if not data.get("groups"):
        return {MAIN: None}
    return {name: g.get("title") for name, g in data["groups"].items()}
