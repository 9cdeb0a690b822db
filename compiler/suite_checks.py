"""A suite's semantic checks: every task, agent and driver it names exists, every group has a
grid, every trial's mode is offered by its task and its scaffold speaks a wire its driver's
provider serves, and every `exclude` entry drops something.

Why a module of its own: a suite's checks read other specs (the tasks and agents it names) and
expand its groups into trials (suite_matrix.py), which no task or agent check does. They register
with `check_for("Suite")` like the others (checks.py); load.py imports this module.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from a2c.compiler.checking import _referenced_data, _spec_file, check_for
from a2c.compiler.document import is_file
from a2c.wires import PROVIDER_WIRES, VLLM_WIRES

# The driver gateway's built-in providers and the wires each serves: the wire package's one
# table, which the gateway's provider list reads too. A drivers-file provider is the
# operator's, known only at run time. `vllm/MODEL` is a server a2c starts itself (its model a
# hub id `org/name` or a folder path, hence a form of its own).
DRIVER_PROVIDER_WIRES = {**PROVIDER_WIRES, "vllm": VLLM_WIRES}
DRIVER_PROVIDERS = tuple(DRIVER_PROVIDER_WIRES)
_DRIVER_FORM = re.compile(r"^(?P<provider>[a-z0-9][a-z0-9_-]*)/[A-Za-z0-9][A-Za-z0-9._:@-]*$|"
                          r"^(?P<vllm>vllm)/[A-Za-z0-9./~_][^\s]*$")
_SCRIPTED_FORM = re.compile(r"^scripted:(?P<name>[a-z0-9][a-z0-9_.-]*)$")


def driver_problem(driver: str, specs_root: Path) -> str | None:
    """Why a suite's driver string is refused (None if it is fine): `provider/model` with a known
    provider, or `scripted:NAME` with a script under specs/drivers/ (by form where the checkout
    has no specs/drivers/)."""
    scripted = _SCRIPTED_FORM.match(driver)
    if scripted:
        folder = specs_root / "drivers"
        name = scripted["name"]
        if folder.is_dir() and not any(is_file(folder / f"{name}{s}") for s in (".yaml", ".yml")):
            from a2c.compiler.schema import suggest
            known = sorted(p.stem for p in folder.glob("*.y*ml"))
            return f"no driver script '{name}' under {specs_root.name}/drivers{suggest(name, known)}"
        return None
    form = _DRIVER_FORM.match(driver)
    if form and form["vllm"]:
        return None
    if not form:
        return (f"unknown driver {driver!r}: write provider/model (e.g. anthropic/claude-sonnet-4-5,"
                " openai/gpt-5-codex, gemini/gemini-2.5-pro) or scripted:NAME")
    if form["provider"] not in DRIVER_PROVIDERS:
        from a2c.compiler.schema import suggest
        return (f"unknown driver provider {form['provider']!r} in {driver!r} (known: "
                f"{', '.join(DRIVER_PROVIDERS)}){suggest(form['provider'], DRIVER_PROVIDERS)}")
    return None


class _Specs:
    """The task and agent specs under the suite's specs folder: which exist (a missing one is
    reported once per reference and remembered) and what type each agent is."""

    def __init__(self, root: Path):
        self.root = root
        self.known = {folder: sorted(p.stem for p in (root / folder).glob("*.y*ml"))
                      for folder in ("tasks", "agents")}
        self.missing: set[tuple[str, str]] = set()
        self.types: dict[str, str | None] = {}

    def ref(self, folder: str, ident: str, path: tuple):
        from a2c.compiler.schema import suggest
        if _spec_file(self.root, folder, ident) is None:
            self.missing.add((folder, ident))
            yield path, (f"no {folder[:-1]} spec '{ident}' under "
                         f"{Path(self.root.name) / folder}{suggest(ident, self.known[folder])}")

    def learn_type(self, agent: str) -> None:
        if agent not in self.types and ("agents", agent) not in self.missing:
            self.types[agent] = (_referenced_data(self.root, "agents", agent) or {}).get("type")


@check_for("Suite")
def suite_references_exist(doc):
    """Every task, agent and driver the suite names exists, every group has a grid, every
    combination's mode is offered by its task, and every `exclude` entry drops something."""
    from a2c.compiler.suite_matrix import groups_of
    root = doc.path.resolve().parent.parent
    data = doc.data
    specs = _Specs(root)
    groups = groups_of(data)
    for name, (prefix, g) in groups.items():
        def origin(key: str, name=name, prefix=prefix) -> tuple:
            return (*prefix, key) if prefix and key in data["groups"][name] else (key,)
        if not (g.get("tasks") and g.get("agents")) and not g.get("include"):
            yield (prefix or ("tasks",)), (f"group '{name}' has no grid: give it tasks and "
                                           "agents (here or at the suite's top level) or an "
                                           "include list")
        yield from _group_references(specs, g, origin)
        yield from _group_drivers(specs, name, g, origin)
    if specs.missing:
        return      # the expansion below would only repeat these
    yield from _trial_problems(root, data, groups, specs.types)


def _group_references(specs: _Specs, g: dict[str, Any], origin):
    """The tasks and agents a group names, in its grid and in its include/exclude entries."""
    for key in ("tasks", "agents"):
        for i, ident in enumerate(g.get(key) or []):
            yield from specs.ref(key, ident, (*origin(key), i))
    for key in ("include", "exclude"):
        for i, entry in enumerate(g.get(key) or []):
            for field, folder in (("task", "tasks"), ("agent", "agents")):
                if field in entry:
                    yield from specs.ref(folder, entry[field], (*origin(key), i, field))


def _group_drivers(specs: _Specs, name: str, g: dict[str, Any], origin):
    """A group's drivers: each well formed, given only to agents the group runs and never to
    a reference agent (which runs without one)."""
    drivers = g.get("drivers") or []
    listed = drivers.items() if isinstance(drivers, dict) else [(None, drivers)]
    include = g.get("include") or []
    for agent, values in listed:
        if agent is not None and agent not in (g.get("agents") or []) and not any(
                x.get("agent") == agent for x in include):
            yield (*origin("drivers"), agent), (f"drivers for agent '{agent}', which group "
                                                f"'{name}' does not run", True)
        for i, driver in enumerate(values):
            why = driver_problem(driver, specs.root)
            if why:
                yield ((*origin("drivers"), agent, i) if agent else (*origin("drivers"), i)), why
    for agent in [*(g.get("agents") or []), *(x["agent"] for x in include)]:
        specs.learn_type(agent)
    if isinstance(drivers, dict):
        for agent in drivers:
            if specs.types.get(agent) == "reference":
                yield (*origin("drivers"), agent), (f"'{agent}' is a reference agent: it runs "
                                                    "without a driver model", True)
    for i, entry in enumerate(include):
        if entry.get("driver") and specs.types.get(entry["agent"]) == "reference":
            yield (*origin("include"), i, "driver"), (f"'{entry['agent']}' is a reference "
                                                      "agent: it runs without a driver model")
        elif entry.get("driver"):
            why = driver_problem(entry["driver"], specs.root)
            if why:
                yield (*origin("include"), i, "driver"), why


def _trial_problems(root: Path, data: dict[str, Any], groups: dict, types: dict):
    """The expanded trials: at least one, each mode offered by its task, each scaffold paired
    with a driver that serves its wire, each exclude entry matching something."""
    from a2c.compiler.suite_matrix import _matches, expand
    from a2c.modes import MODES
    cells = expand(data, types)
    if not cells:
        yield ("id",), "the suite expands to no trial (everything excluded?)"
    modes_of: dict[str, list] = {}
    reported: set[tuple] = set()
    yield from _wire_mismatches(root, cells)
    for cell in cells:
        if cell.task not in modes_of:
            task = _referenced_data(root, "tasks", cell.task) or {}
            modes_of[cell.task] = list(task.get("modes") or MODES)
        if cell.mode not in modes_of[cell.task] and (cell.task, cell.mode) not in reported:
            reported.add((cell.task, cell.mode))
            yield cell.where["mode"], (
                f"task '{cell.task}' does not offer mode '{cell.mode}' (it offers "
                f"{', '.join(modes_of[cell.task])}); drop the mode or add "
                f"exclude: [{{task: {cell.task}, mode: {cell.mode}}}]")
    for name, (prefix, g) in groups.items():
        unexpanded = _unexcluded(g, types)
        origin = (*prefix, "exclude") if prefix and "exclude" in data["groups"][name] \
            else ("exclude",)
        for i, entry in enumerate(g.get("exclude") or []):
            if not any(_matches(c, entry) for c in unexpanded):
                yield (*origin, i), "this exclude entry matches no combination of the group"


def _wire_mismatches(root: Path, cells: list):
    """A trial whose scaffold speaks no wire its driver's provider serves would stop at its
    pre-flight (the gateway passes requests through, it does not translate): refused here, once
    per scaffold and provider, where the scaffold is named."""
    wires_of: dict[str, list] = {}
    reported: set[tuple] = set()
    for cell in cells:
        form = _DRIVER_FORM.match(cell.driver or "")
        provider = (form["provider"] or form["vllm"]) if form else None
        if provider not in DRIVER_PROVIDER_WIRES or (cell.agent, provider) in reported:
            continue
        if cell.agent not in wires_of:
            wire = ((_referenced_data(root, "agents", cell.agent) or {}).get("driver")
                    or {}).get("wire")
            wires_of[cell.agent] = [] if wire is None else [wire] if isinstance(wire, str) \
                else list(wire)
        spoken = wires_of[cell.agent]
        if spoken and not set(spoken) & set(DRIVER_PROVIDER_WIRES[provider]):
            reported.add((cell.agent, provider))
            yield cell.where["agent"], (
                f"agent '{cell.agent}' speaks {', '.join(spoken)}; driver '{cell.driver}' is "
                f"served as {', '.join(DRIVER_PROVIDER_WIRES[provider])}: pair the agent with "
                f"drivers of a provider that serves its wire (drivers: {{{cell.agent}: [...]}})")


def _unexcluded(group: dict, types: dict) -> list:
    """The group's combinations before `exclude` (to tell an exclude that matches nothing)."""
    from a2c.compiler.suite_matrix import expand
    return expand({k: v for k, v in group.items() if k != "exclude"}, types)
