"""Every record's JSON Schema document, generated from the record classes (the mapping of one
dataclass to a schema is a2c.contracts.schema_of)."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from a2c.contracts.schema_of import SCHEMA_DIR, record_schema, type_schema

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://a2c.dev/schemas/"


def spec_schemas(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """A resolved-spec record's schema (a2c.contracts.spec) into `defs`, with its nested ones:
    each field's `doc` its description. No key is required (the compiler writes them all; a
    reader takes an older or hand-made manifest without some) and keys the record does not
    know are allowed (a reader keeps them)."""
    from a2c.contracts.spec import DOC, SpecRecord

    if cls.__name__ in defs:
        return {"$ref": f"#/$defs/{cls.__name__}"}
    defs[cls.__name__] = {}
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    for f in cls.fields_of():
        for inner in _nested(hints[f.name]):
            if isinstance(inner, type) and issubclass(inner, SpecRecord):
                spec_schemas(inner, defs)
        props[f.name] = {**type_schema(hints[f.name]), "description": f.metadata[DOC]}
    out: dict[str, Any] = {"type": "object",
                           "description": " ".join((cls.__doc__ or "").split()),
                           "properties": props}
    defs[cls.__name__] = out
    return {"$ref": f"#/$defs/{cls.__name__}"}


def _nested(tp: Any) -> list[Any]:
    """`tp` and every type argument inside it."""
    out = [tp]
    for arg in typing.get_args(tp):
        out += _nested(arg)
    return out


def _document(name: str, title: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DRAFT, "$id": f"{BASE_ID}{name}.schema.json", "title": title, **body}


def generate_all() -> dict[str, dict[str, Any]]:
    """{file name: schema} for every record."""
    from a2c.contracts import (
        bundle,
        events,
        grade_result,
        journal,
        process_record,
        service_config,
        spec,
        trajectory,
    )

    out: dict[str, dict[str, Any]] = {}

    # Bundle manifests: one schema, the kind picks the body's key (a2c.contracts.spec).
    spec_defs: dict[str, Any] = {}
    manifest = {"type": "object", "required": ["format", "kind", "id", "spec_hash", "files",
                                               "digest"],
                "properties": {"format": {"const": bundle.BUNDLE_FORMAT},
                               "kind": {"enum": list(bundle.KINDS)},
                               "id": {"type": "string"}, "spec_hash": {"type": "string"},
                               "compiler_version": {"type": "string"},
                               "files": {"type": "object",
                                         "additionalProperties": {"type": "string"}},
                               "digest": {"type": "string"},
                               **{k.lower(): spec_schemas(spec.SPEC_CLASSES[k], spec_defs)
                                  for k in bundle.KINDS}},
                "description": " ".join((bundle.BundleManifest.__doc__ or "").split())}
    out["bundle"] = _document("bundle", "a2c bundle manifest (bundle.json, agent.json, "
                                        "suite.json)", {**manifest, "$defs": spec_defs})

    defs = {cls.__name__: record_schema(cls) for cls in events.EVENT_TYPES.values()}
    envelope = record_schema(events.Event)
    envelope["properties"]["type"] = {"type": "string"}
    envelope["required"] = ["seq", "ts", "type", "data", "prev", "hash"]
    envelope["allOf"] = [{"if": {"properties": {"type": {"const": t}}},
                          "then": {"properties": {"data": {"$ref": f"#/$defs/{cls.__name__}"}}}}
                         for t, cls in events.EVENT_TYPES.items()]
    out["event"] = _document("event", "a2c event (one line of events.jsonl)",
                             {**envelope, "$defs": defs})

    entries = {cls.__name__: record_schema(cls, const={"op": op})
               for op, cls in journal.ENTRY_TYPES.items()}
    out["journal_entry"] = _document(
        "journal_entry", "a2c journal entry (one line of submissions.jsonl)",
        {"oneOf": [{"$ref": f"#/$defs/{name}"} for name in entries], "$defs": entries})

    kinds = {cls.__name__: record_schema(cls, const={"kind": kind})
             for kind, cls in process_record.ENTRY_TYPES.items()}
    out["process_record"] = _document(
        "process_record", "a2c process record entry (one line of logs/processes.jsonl)",
        {"oneOf": [{"$ref": f"#/$defs/{name}"} for name in kinds], "$defs": kinds})

    result = record_schema(grade_result.GradeResult)
    result["properties"]["score"] = {"type": ["number", "null"]}  # an invalid result: null
    result["properties"]["ci95"] = {"type": ["array", "null"], "items": {"type": ["number",
                                                                                  "null"]}}
    out["grade_result"] = _document("grade_result", "a2c grade result (results/<n>.json)",
                                    result)

    out["run_info"] = _run_info_schema()
    # grader/service.json: run_dir is where the file is, raw the file itself.
    service = _without(record_schema(service_config.ServiceConfig), "run_dir", "raw")
    out["service_config"] = _document("service_config",
                                      "a2c grader service configuration (grader/service.json)",
                                      service)
    out["trajectory"] = _document("trajectory", "a2c trajectory (trajectory.json, ATIF-compatible)",
                                  trajectory.schema_body())
    return out


def _run_info_schema() -> dict[str, Any]:
    """run.json: keys a later step adds may be absent; unknown keys are kept (`extra`)."""
    from a2c.contracts import budget, driver_server, run_info
    run = _without(record_schema(run_info.RunInfo), "extra")
    nested = (budget.Budget, run_info.RunSettings, run_info.AgentExit, run_info.GpuPlacement,
              run_info.BaseModelRecord, run_info.DataRecord,
              driver_server.DriverServerRecord, driver_server.Weights, driver_server.ContextFit,
              driver_server.ShareRecord, driver_server.Sampling)
    return _document("run_info", "a2c run record (run.json)",
                     {**run, "additionalProperties": True,
                      "$defs": {cls.__name__: record_schema(cls) for cls in nested}})


def _without(schema: dict[str, Any], *keys: str) -> dict[str, Any]:
    """A record schema less fields that live in memory only."""
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in keys}
    if "required" in schema:
        schema["required"] = [k for k in schema["required"] if k not in keys]
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def write_all(directory: Path = SCHEMA_DIR) -> list[Path]:
    from a2c.fsutil import write_text_atomic

    return [write_text_atomic(directory / f"{name}.schema.json", render(schema))
            for name, schema in generate_all().items()]
