"""The JSON Schemas (Draft 2020-12) and translation of their errors into spec problems.

The schema files under `compiler/schemas/` are the single source of truth for the shape of a spec.
Every error jsonschema finds is reported (not just the first) as `file:line:col: field.path: what`,
with "did you mean" suggestions for unknown keys and enum values.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from a2c.compiler.yamlsrc import Source, dotted
from a2c.paths import SCHEMAS_DIR

KINDS = {"Task": "task", "Agent": "agent", "Suite": "suite"}

_SECRET_KEYS = {"endpoint", "api_key", "apikey", "base_url", "url", "key", "token", "api_base"}

_TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string",
               "integer": "an integer", "number": "a number", "boolean": "true or false",
               "null": "null"}


def _yaml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "null" if value is None else type(value).__name__


@cache
def load_schema(name: str) -> dict:
    """The schema for `name` in task|agent|suite."""
    return json.loads((SCHEMAS_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(load_schema(name))


def suggest(word: str, options) -> str:
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def problems_for(kind_name: str, data: Any, source: Source) -> list[str]:
    """Every schema violation of `data` against the `kind_name` schema, formatted and sorted."""
    out: list[tuple[str, str]] = []
    for error in validator(kind_name).iter_errors(data):
        out.extend(_translate(error, source))
    return _sorted_unique(out)


def _sorted_unique(items: list[tuple[str, str]]) -> list[str]:
    def key(item):
        where = item[0]
        parts = where.rsplit(":", 2)
        try:
            return (parts[0], int(parts[1]), int(parts[2]), item[1])
        except (IndexError, ValueError):
            return (where, 0, 0, item[1])
    seen, result = set(), []
    for where, text in sorted(items, key=key):
        line = f"{where}: {text}"
        if line not in seen:
            seen.add(line)
            result.append(line)
    return result


def _fmt(path: tuple, what: str) -> str:
    return f"{dotted(path) or '(document)'}: {what}"


def _translate(error: ValidationError, source: Source) -> list[tuple[str, str]]:
    path = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    instance = error.instance
    v = error.validator
    custom = schema.get("x-error")

    if v == "additionalProperties" and isinstance(instance, dict):
        known = set(schema.get("properties", {}))
        removed = schema.get("x-removed", {})
        out = []
        for key in sorted(k for k in instance if k not in known):
            if key in removed:
                out.append((source.where(path + (key,), key=True), _fmt(path + (key,), removed[key])))
                continue
            if key.lower() in _SECRET_KEYS:
                hint = ("; endpoints and keys never go in a spec: the runtime reads them from the "
                        "environment")
            else:
                hint = suggest(key, known)
            out.append((source.where(path + (key,), key=True),
                        _fmt(path + (key,), f"unknown key '{key}'{hint}")))
        return out
    if v == "required" and isinstance(instance, dict):
        return [(source.where(path), _fmt(path + (key,), "required field is missing"))
                for key in error.validator_value if key not in instance]
    if v in ("oneOf", "anyOf"):
        return _translate_one_of(error, source, path, schema, instance)
    if v == "type":
        if custom:
            return [(source.where(path), _fmt(path, custom))]
        expected = error.validator_value
        expected = expected if isinstance(expected, list) else [expected]
        names = " or ".join(_TYPE_NAMES.get(t, t) for t in expected)
        return [(source.where(path), _fmt(path, f"must be {names}, not {_yaml_type(instance)}"))]
    if v == "enum":
        options = ", ".join(json.dumps(o) if not isinstance(o, str) else o
                            for o in error.validator_value)
        hint = suggest(instance, error.validator_value) if isinstance(instance, str) else ""
        return [(source.where(path), _fmt(path, f"must be one of: {options} (got {instance!r}){hint}"))]
    if v == "const":
        return [(source.where(path), _fmt(path, f"must be {error.validator_value!r} (got {instance!r})"))]
    if v == "pattern" and custom:
        return [(source.where(path), _fmt(path, f"{custom} (got {instance!r})"))]
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") and custom:
        return [(source.where(path), _fmt(path, f"{custom} (got {instance!r})"))]
    if v == "uniqueItems":
        return [(source.where(path), _fmt(path, "items must be unique"))]
    if v == "minItems" and error.validator_value == 1:
        return [(source.where(path), _fmt(path, "must not be empty"))]
    if v == "minLength" and error.validator_value == 1:
        return [(source.where(path), _fmt(path, "must not be empty"))]
    if v == "minProperties":
        return [(source.where(path), _fmt(path, "must not be empty"))]
    return [(source.where(path), _fmt(path, error.message))]


def _translate_one_of(error, source, path, schema, instance) -> list[tuple[str, str]]:
    branches = schema.get(error.validator, [])
    keys = schema.get("x-one-of")
    if keys:
        if not isinstance(instance, dict):
            return [(source.where(path), _fmt(path, f"must be a mapping with one of: "
                                                    f"{', '.join(keys)}; got {_yaml_type(instance)}"))]
        present = [k for k in keys if k in instance]
        if not present:
            return [(source.where(path), _fmt(path, f"needs exactly one of: {', '.join(keys)}"
                                                    f"{_first_unknown_hint(instance, keys)}"))]
        if len(present) > 1:
            return [(source.where(path), _fmt(path, f"give only one of: {', '.join(present)}"))]
        index = keys.index(present[0])
        if index < len(branches) and set(branches[index]) - {"required"}:
            sub = [e for e in error.context if e.schema_path and e.schema_path[0] == index]
            out = []
            for e in sub:
                out.extend(_translate(e, source))
            if out:
                return out
        return [(source.where(path), _fmt(path, error.message))]
    # Inline text or {file: ...}
    if isinstance(instance, dict):
        for index, branch in enumerate(branches):
            if branch.get("type") == "object":
                out = []
                for e in error.context:
                    if e.schema_path and e.schema_path[0] == index:
                        out.extend(_translate(e, source))
                if out:
                    return out
    if instance == "":
        return [(source.where(path), _fmt(path, "must not be empty"))]
    return [(source.where(path), _fmt(path, "must be Markdown text or a mapping {file: path}, "
                                            f"not {_yaml_type(instance)}"))]


def _first_unknown_hint(instance: dict, keys: list[str]) -> str:
    for key in instance:
        hint = suggest(key, keys)
        if hint:
            return f" ('{key}' given{hint})"
    return ""
