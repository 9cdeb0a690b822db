"""Semantic checks, after the schema pass: what a schema cannot say, in the same message format.

Each check is a small function `(doc) -> list[(path, what)]`, registered per kind with
`check_for` (checking.py, which runs them all: every problem is reported). These are the task's
and the agent's; a suite's are suite_checks.py's, the agent params checks params.py's; load.py
imports all three modules, so all register.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from a2c.compiler.checking import check_for
from a2c.compiler.document import is_file
from a2c.durations import parse_duration

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
