"""Dataclass -> JSON Schema (the small subset of typing the records use), and the committed
schemas read back (`load_schema`). A record module may use it (trajectory.py states its own
schema); the generator of every document (a2c/contracts/schemas/generate.py) imports the records."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from pathlib import Path
from typing import Any, Union

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


def type_schema(tp: Any) -> dict[str, Any]:
    """The schema of one annotation."""
    if tp is Any:
        return {}
    if dataclasses.is_dataclass(tp):        # a nested record: one of the document's $defs
        return {"$ref": f"#/$defs/{tp.__name__}"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):     # written as its values
        return {"enum": [m.value for m in tp]}
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = [type_schema(a) for a in typing.get_args(tp)]
        if any(not o for o in options):
            return {}
        simple = [o["type"] for o in options if set(o) == {"type"} and isinstance(o["type"], str)]
        if len(simple) == len(options):
            return {"type": simple}
        return {"anyOf": options}
    if tp is type(None):
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str or tp is Path:     # paths are written as strings
        return {"type": "string"}
    if origin in (list, tuple) or tp in (list, tuple):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        out: dict[str, Any] = {"type": "array"}
        if origin is tuple and args and len(args) > 1:
            out.update(prefixItems=[type_schema(a) for a in args], minItems=len(args),
                       maxItems=len(args))
        elif args:
            out["items"] = type_schema(args[0])
        return out
    if origin is dict or tp is dict:
        args = typing.get_args(tp)
        out = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            out["additionalProperties"] = type_schema(args[1])
        return out
    raise TypeError(f"no JSON Schema for annotation {tp!r}")


def record_schema(cls: type, *, const: dict[str, str] | None = None) -> dict[str, Any]:
    """An object schema for a dataclass: a property per field; fields without a default are
    required; `const` adds fixed-value keys (a journal entry's `op`)."""
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for key, value in (const or {}).items():
        props[key] = {"const": value}
        required.append(key)
    for f in dataclasses.fields(cls):
        props[f.name] = type_schema(hints[f.name])
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    out: dict[str, Any] = {"type": "object", "properties": props}
    if cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("):
        out["description"] = " ".join(cls.__doc__.split())
    if required:
        out["required"] = required
    return out


def load_schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
