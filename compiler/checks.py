"""Semantic checks, after the schema pass: what a schema cannot say, in the same message format.

Each check is a small function `(doc) -> list[(path, what)]`, registered per kind with
`check_for` (checking.py, which runs them all: every problem is reported). The agent params
checks are params.py's; load.py imports both modules, so both register.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from a2c.compiler.checking import _referenced_data, _spec_file, check_for
from a2c.compiler.document import is_file
from a2c.durations import parse_duration
from a2c.wires import PROVIDER_WIRES, VLLM_WIRES

LEVEL_GRADERS = {1: ("exact_match", "humaneval"), 2: ("pairwise_judge",), 3: ("rollout",)}
REQUIRED_FIELDS = {"exact_match": ("prompt", "answer"), "humaneval": ("prompt", "test", "entry_point"),
                   "pairwise_judge": ("prompt",), "rollout": ()}

@check_for("Task", "Agent", "Suite")
def id_matches_file(doc):
    stem = doc.path.stem
    if doc.data["id"] != stem:
        yield ("id",), (f"id '{doc.data['id']}' does not match the file name '{doc.path.name}'; "
                        f"name the file {doc.data['id']}{doc.path.suffix or '.yaml'}")


@check_for("Task", "Agent")
def referenced_files_exist(doc):
    for key in ("description", "prompt"):
        value = doc.data.get(key)
        if isinstance(value, dict) and "file" in value:
            target = doc.path.parent / value["file"]
            if not is_file(target):
                yield (key, "file"), f"file not found: {value['file']} (looked at {target})"
            else:
                try:
                    target.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    yield (key, "file"), f"{value['file']} is not valid UTF-8"
                except OSError as exc:
                    yield (key, "file"), f"cannot read {value['file']}: {exc.strerror}"


@check_for("Task")
def level_fits_grader(doc):
    level, kind = doc.data["level"], doc.data["grader"]["kind"]
    if kind not in LEVEL_GRADERS[level]:
        fits = ", ".join(LEVEL_GRADERS[level])
        yield ("grader", "kind"), (f"grader kind '{kind}' does not fit level {level} "
                                   f"(level {level} uses: {fits})")
    if level == 3 and not doc.data["grader"].get("env"):
        yield ("grader",), "a level-3 task must declare its environment (grader.env)"
    if level != 3 and doc.data["grader"].get("env"):
        yield ("grader", "env"), "only level-3 (interactive) tasks have an environment"


def _slice(text):
    if text is None:
        return (0, None)
    start, _, stop = text.partition(":")
    return (int(start) if start else 0, int(stop) if stop else None)


@check_for("Task")
def splits_do_not_overlap(doc):
    data = doc.data["data"]
    agent, held = data["agent"], data["heldout"]
    src = data["source"]
    if "files" in src:
        for role in ("agent", "heldout"):
            split = data[role]["split"]
            if split not in src["files"]:
                yield ("data", role, "split"), (f"split '{split}' is not among the source files "
                                                f"({', '.join(sorted(src['files']))})")
        for split, rel in src["files"].items():
            target = doc.path.parent / rel
            if not is_file(target):
                yield ("data", "source", "files", split), (f"file not found: {rel} "
                                                            f"(looked at {target})")
    for role in ("agent", "heldout"):
        s = data[role].get("slice")
        if s is not None:
            a, b = _slice(s)
            if a < 0 or (b is not None and b < 0):
                yield ("data", role, "slice"), ("negative slice bounds cannot be checked for "
                                                "overlap; use non-negative indices")
                return
            if b is not None and b <= a:
                yield ("data", role, "slice"), f"slice '{s}' selects no rows"
    if agent["split"] != held["split"]:
        return
    a1, b1 = _slice(agent.get("slice"))
    a2, b2 = _slice(held.get("slice"))
    inf = float("inf")
    if max(a1, a2) < min(b1 if b1 is not None else inf, b2 if b2 is not None else inf):
        yield ("data", "heldout"), (f"the held-out part overlaps the agent's part of split "
                                    f"'{agent['split']}' (agent slice {agent.get('slice') or 'all'}"
                                    f", held-out slice {held.get('slice') or 'all'}); "
                                    f"use disjoint slices or different splits")


@check_for("Task")
def grader_params_make_sense(doc):
    g = doc.data["grader"]
    kind = g["kind"]
    params = g.get("params") or {}
    fields = doc.data["data"]["fields"]
    for field in REQUIRED_FIELDS[kind]:
        if field not in fields:
            yield ("data", "fields"), f"grader '{kind}' needs a '{field}' field in the mapping"
    if kind == "pairwise_judge":
        ref = params.get("reference_field", "answer")
        if ref not in fields:
            yield ("data", "fields"), (f"the judge compares against reference field '{ref}', "
                                       "which the field mapping does not define")
    for key in ("pattern", "answer_pattern"):
        if kind == "exact_match" and params.get(key):
            try:
                compiled = re.compile(params[key])
            except re.error as exc:
                yield ("grader", "params", key), f"not a valid regular expression: {exc}"
                continue
            if compiled.groups < 1:
                yield ("grader", "params", key), ("the pattern needs a capture group "
                                                  "around the answer, e.g. '####\\s*(-?[\\d,.]+)'")
    template = (g.get("inference") or {}).get("prompt_template")
    if template is not None:
        try:
            names = {name.split(".")[0].split("[")[0]
                     for _, name, _, _ in string.Formatter().parse(template) if name}
        except ValueError as exc:
            yield ("grader", "inference", "prompt_template"), f"not a valid format string: {exc}"
        else:
            for name in sorted(names - set(fields)):
                yield (("grader", "inference", "prompt_template"),
                       (f"uses {{{name}}}, which the field mapping does not define "
                       f"(fields: {', '.join(sorted(fields))})"))


@check_for("Task")
def services_are_distinct(doc):
    services = (doc.data.get("environment") or {}).get("services", [])
    seen_names, seen_ports = {}, {}
    for i, svc in enumerate(services):
        if svc["name"] in seen_names:
            yield ("environment", "services", i, "name"), f"duplicate service name '{svc['name']}'"
        if svc["port"] in seen_ports:
            yield ("environment", "services", i, "port"), (f"port {svc['port']} is already used "
                                                           f"by '{seen_ports[svc['port']]}'")
        seen_names[svc["name"]] = i
        seen_ports[svc["port"]] = svc["name"]


@check_for("Task")
def budget_is_coherent(doc):
    b = doc.data.get("budget") or {}

    def seconds(value):          # as resolve.seconds: 0 allowed, said below where it is not
        return parse_duration(value, allow_zero=True)

    wall = seconds(b.get("wall_clock", "12h"))
    if wall <= 0:
        yield ("budget", "wall_clock"), "the wall clock must be longer than 0s"
    if "eval_timeout" in b and seconds(b["eval_timeout"]) <= 0:
        yield ("budget", "eval_timeout"), "the evaluation timeout must be longer than 0s"
    if "min_interval" in b and seconds(b["min_interval"]) >= wall:
        yield ("budget", "min_interval"), ("the minimum interval between submissions is not "
                                           "shorter than the whole wall clock")


@check_for("Agent")
def agent_driver(doc):
    d = doc.data
    drv = d.get("driver") or {}
    if d["type"] == "reference" and drv.get("required"):
        yield ("driver", "required"), "reference agents run without a driver model"
    if d["type"] == "cli" and "$A2C_PROMPT" not in d["launch"]["command"]:
        yield ("launch", "command"), ("the launch command never passes the prompt: use "
                                      "\"$A2C_PROMPT\" or \"$A2C_PROMPT_FILE\"")


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



@check_for("Suite")
def suite_references_exist(doc):
    """Every task, agent and driver the suite names exists, every group has a grid, every
    combination's mode is offered by its task, and every `exclude` entry drops something."""
    from a2c.compiler.schema import suggest
    from a2c.compiler.suite_matrix import _matches, expand, groups_of
    from a2c.modes import MODES
    root = doc.path.resolve().parent.parent
    data = doc.data
    known = {folder: sorted(p.stem for p in (root / folder).glob("*.y*ml"))
             for folder in ("tasks", "agents")}
    missing: set[tuple[str, str]] = set()

    def ref(folder, ident, path):
        if _spec_file(root, folder, ident) is None:
            missing.add((folder, ident))
            yield path, (f"no {folder[:-1]} spec '{ident}' under "
                         f"{Path(root.name) / folder}{suggest(ident, known[folder])}")

    groups = groups_of(data)
    types: dict[str, str | None] = {}
    for name, (prefix, g) in groups.items():
        at = prefix or ()
        if not (g.get("tasks") and g.get("agents")) and not g.get("include"):
            yield (at or ("tasks",)), (f"group '{name}' has no grid: give it tasks and agents "
                                       "(here or at the suite's top level) or an include list")
        for key, folder in (("tasks", "tasks"), ("agents", "agents")):
            origin = (*prefix, key) if prefix and key in data["groups"][name] else (key,)
            for i, ident in enumerate(g.get(key) or []):
                yield from ref(folder, ident, (*origin, i))
        for key in ("include", "exclude"):
            origin = (*prefix, key) if prefix and key in data["groups"][name] else (key,)
            for i, entry in enumerate(g.get(key) or []):
                for field, folder in (("task", "tasks"), ("agent", "agents")):
                    if field in entry:
                        yield from ref(folder, entry[field], (*origin, i, field))
        drivers = g.get("drivers") or []
        d_origin = (*prefix, "drivers") if prefix and "drivers" in data["groups"][name] \
            else ("drivers",)
        listed = drivers.items() if isinstance(drivers, dict) else [(None, drivers)]
        for agent, values in listed:
            if agent is not None and agent not in (g.get("agents") or []) and not any(
                    x.get("agent") == agent for x in g.get("include") or []):
                yield (*d_origin, agent), (f"drivers for agent '{agent}', which group '{name}' "
                                           "does not run", True)
            for i, driver in enumerate(values):
                why = driver_problem(driver, root)
                if why:
                    yield ((*d_origin, agent, i) if agent else (*d_origin, i)), why
        for agent in [*(g.get("agents") or []), *(x["agent"] for x in g.get("include") or [])]:
            if agent not in types and (("agents", agent) not in missing):
                agent_doc = _referenced_data(root, "agents", agent) or {}
                types[agent] = agent_doc.get("type")
        if isinstance(drivers, dict):
            for agent in drivers:
                if types.get(agent) == "reference":
                    yield (*d_origin, agent), (f"'{agent}' is a reference agent: it runs without "
                                               "a driver model", True)
        inc_origin = (*prefix, "include") if prefix and "include" in data["groups"][name] \
            else ("include",)
        for i, entry in enumerate(g.get("include") or []):
            if entry.get("driver") and types.get(entry["agent"]) == "reference":
                yield (*inc_origin, i, "driver"), (f"'{entry['agent']}' is a reference agent: it "
                                                   "runs without a driver model")
            elif entry.get("driver"):
                why = driver_problem(entry["driver"], root)
                if why:
                    yield (*inc_origin, i, "driver"), why
    if missing:
        return      # the expansion below would only repeat these
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
        unexpanded = _unexcluded(g, types, name)
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


def _unexcluded(group: dict, types: dict, name: str) -> list:
    """The group's combinations before `exclude` (to tell an exclude that matches nothing)."""
    from a2c.compiler.suite_matrix import expand
    return expand({k: v for k, v in group.items() if k != "exclude"}, types)


def _gold_texts(doc, split: str, rel: str, column: str):
    """(record id, gold text) of a local data file, for the answer-format round trip; nothing
    for a format the standard library cannot read (parquet) or a file another check reports."""
    target = doc.path.parent / rel
    if not is_file(target):
        return
    fmt = doc.data["data"]["source"].get("format") or Path(rel).suffix.lstrip(".")
    try:
        text = target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    rows: list = []
    try:
        if fmt == "csv":
            import csv
            import io
            rows = list(csv.DictReader(io.StringIO(text)))
        elif fmt in ("jsonl", "json"):
            import json
            try:                          # a JSON array, or a one-line JSONL file
                value = json.loads(text)
                rows = value if isinstance(value, list) else [value]
            except ValueError:
                rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return
    id_column = doc.data["data"]["fields"].get("id", "id")
    for n, row in enumerate(rows):
        if isinstance(row, dict) and row.get(column) not in (None, ""):   # datacheck: empty
            yield str(row.get(id_column, f"{split}-{n}")), str(row[column])


@check_for("Task")
def answer_format_round_trips(doc):
    """The gold answer written in the answer format must be read back to itself by the pattern
    and the normalisation: otherwise even a perfect model scores 0 (a2c.answer_format)."""
    from a2c.answer_format import PLACEHOLDER, derive, round_trip

    g = doc.data["grader"]
    if g["kind"] != "exact_match":
        return
    params = g.get("params") or {}
    pattern = params.get("pattern")
    try:
        if re.compile(pattern).groups < 1 or (params.get("answer_pattern") and
                                              re.compile(params["answer_pattern"]).groups < 1):
            return                                  # grader_params_make_sense says so
    except (re.error, TypeError):
        return
    declared = params.get("answer_format")
    if declared is not None:
        if declared.count(PLACEHOLDER) != 1:
            yield ("grader", "params", "answer_format"), (
                f"'{declared}' must contain {PLACEHOLDER} exactly once, where the answer goes")
            return
    fmt = declared or derive(pattern)
    where = ("grader", "params", "answer_format" if declared else "pattern")
    if fmt is None:
        yield where, (f"the answer format cannot be derived from the pattern '{pattern}' (its text "
                      f"around group 1 is not plain literal text); state it, e.g. "
                      f"answer_format: 'Answer: {PLACEHOLDER}'")
        return
    opts = {"pattern": pattern, "answer_pattern": params.get("answer_pattern"),
            "normalize_mode": params.get("normalize", "number"),
            "match": params.get("match", "first")}
    src = doc.data["data"]["source"]
    column = doc.data["data"]["fields"].get("answer")
    samples: list[tuple[str, str, str]] = []
    if "files" in src and column:
        for split, rel in sorted(src["files"].items()):
            samples += [(rel, rid, gold) for rid, gold in _gold_texts(doc, split, rel, column)]
    elif opts["normalize_mode"] == "number":
        samples.append(("an example", "-", "42"))      # numeric answers, data not here yet
    failed = []
    for rel, rid, gold in samples:
        ok, target, got = round_trip(fmt, gold, **opts)
        if not ok:
            failed.append((rel, rid, target, got))
    if failed:
        rel, rid, target, got = failed[0]
        read = "no match" if got is None else f"'{got}'"
        where_from = f"record '{rid}' of {rel}" if rid != "-" else rel
        yield where, (f"the pattern does not match the gold answer written as the target: "
                      f"'{target}' -> {read} ({where_from}; {len(failed)} of {len(samples)} "
                      f"gold answers fail); widen the pattern or change answer_format")
