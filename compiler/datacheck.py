"""The data files a task names, checked when it is validated and built, not when it is run.

A local source (`data.source.files`: JSONL, JSON or CSV beside the spec) is read record by record:
every record must be an object that has each column the field mapping names (`data.fields`), and
the columns the grader reads (prompt and answer, a test and entry point, the judge's reference,
the id) must not be null. Without this a record that lacks its answer passed `validate` and
`build` and was found only by `a2c check` or in the middle of a run, without a file or a line.

Problems have the spec problems' form, `file:line:col: field.path: what`, where the file and line
are the data file's and the field path the spec's (`data.fields.answer`), one per file: the first
bad record, with how many others share its fault. Hub, package and generator sources are not
here at compile time and are not read. The compiler reads the files with the standard library
only (as checks.py's answer-format round trip does); the runtime's loader stays the authority on
what a run reads (runtime/data/splits.py refuses a mapping that names a missing column).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from a2c.compiler.checks import REQUIRED_FIELDS
from a2c.compiler.document import is_file

MAX_BYTES = 512 << 20         # larger files are left to the runtime (and to `a2c check`)
READ_BY = {"jsonl": "jsonl", "json": "json", "csv": "csv"}


def _format(source: dict, rel: str) -> str | None:
    name = rel[:-3] if rel.endswith(".gz") else rel
    fmt = source.get("format") or Path(name).suffix.lstrip(".")
    return READ_BY.get(fmt)


def _text(path: Path) -> str:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def _records(fmt: str, text: str) -> Iterator[tuple[int, int, Any, str | None]]:
    """(line, column, record, problem) for each record of the file; a record that cannot be
    read comes with its problem (and stops the file: what follows cannot be trusted)."""
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text))
        try:
            for row in reader:
                yield reader.line_num, 1, row, None
        except csv.Error as exc:
            yield reader.line_num, 1, None, f"not valid CSV: {exc}"
        return
    if fmt == "json":
        try:
            value = json.loads(text)
        except ValueError as exc:
            if "\n" in text.strip():
                yield from _records("jsonl", text)      # JSON lines under a .json name
                return
            yield getattr(exc, "lineno", 1), getattr(exc, "colno", 1), None, \
                f"not valid JSON: {getattr(exc, 'msg', exc)}"
            return
        for record in value if isinstance(value, list) else [value]:
            yield 1, 1, record, None
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            yield n, getattr(exc, "colno", 1), None, f"not valid JSON: {getattr(exc, 'msg', exc)}"
            return
        yield n, 1, record, None


def _read_fields(doc) -> dict[str, bool]:
    """{field: must not be null} for every field the mapping names."""
    data, grader = doc.data["data"], doc.data["grader"]
    fields = data["fields"]
    strict = set(REQUIRED_FIELDS.get(grader["kind"], ())) | {"id"}
    if grader["kind"] == "pairwise_judge":
        strict.add((grader.get("params") or {}).get("reference_field", "answer"))
    return {field: field in strict for field in fields}


def _what(field: str) -> str:
    return {"answer": "the gold answer", "prompt": "the prompt", "id": "the record id",
            "test": "the tests", "entry_point": "the entry point"}.get(field, f"field '{field}'")


def _file_problems(doc, split: str, rel: str, target: Path) -> list[str]:
    source = doc.data["data"]["source"]
    fmt = _format(source, rel)
    files_path = f"data.source.files.{split}"
    if fmt is None or target.stat().st_size > MAX_BYTES:
        return []                       # parquet, or too large to read here: the runtime's
    try:
        text = _text(target)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        what = "not valid UTF-8" if isinstance(exc, UnicodeDecodeError) else f"cannot read: {exc}"
        return [f"{target}:1:1: {files_path}: {what}"]
    fields = doc.data["data"]["fields"]
    wanted = _read_fields(doc)
    first: tuple[int, str, str] | None = None
    bad, total = 0, 0
    for line, col, record, problem in _records(fmt, text):
        if problem:
            return [f"{target}:{line}:{col}: {files_path}: {problem}"]
        total += 1
        if not isinstance(record, dict):
            kind = "a list" if isinstance(record, list) else type(record).__name__
            return [f"{target}:{line}:1: {files_path}: a record must be an object with the "
                    f"mapped columns ({', '.join(sorted(set(fields.values())))}), got {kind}"]
        for field, column in fields.items():
            value = record.get(column)
            missing = column not in record
            if missing or (wanted[field] and (value is None or (fmt == "csv" and value == ""))):
                bad += 1
                if first is None:
                    rid = record.get(fields.get("id", "id"))
                    who = f"record '{rid}'" if rid not in (None, "") else "the record"
                    state = "has no" if missing else "has an empty"
                    first = (line, f"data.fields.{field}",
                             f"{who} {state} '{column}' column ({_what(field)}, which the "
                             f"grader reads)")
                break
    if first is not None:
        line, path, what = first
        others = f"; {bad - 1} more of the {total} records in this file too" if bad > 1 else ""
        return [f"{target}:{line}:1: {path}: {what}{others}"]
    if total == 0:
        return [f"{target}:1:1: {files_path}: the file has no records"]
    return []


def problems(doc) -> list[str]:
    """Every problem of the local data files a task spec names (none for other kinds)."""
    if doc.kind != "Task":
        return []
    source = doc.data["data"]["source"]
    out: list[str] = []
    for split, rel in sorted((source.get("files") or {}).items()):
        target = doc.path.parent / rel
        if is_file(target):             # a missing file: checks.splits_do_not_overlap says so
            out.extend(_file_problems(doc, split, rel, target))
    return out
