"""The checks of `a2c verify` (analysis/verify.py) on what the report reads besides the events:
run.json against the authenticated `run_started` and `run_finished` events, the agent split
against its recorded fingerprint, the driver gateway's call bodies (driver/blobs) against the
hashes the `driver_call` events give them, and every sealed file against the record's seal
(a2c.contracts.seal: run.json, the journal, results/*, logs/*, the rendered prompt, data/*).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json, sha256_bytes
from a2c.contracts.event_payloads import DriverCall, RunFinished, RunStarted
from a2c.contracts.records import Record
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.seal import check_seals

from .record import RunRecord

# run.json keys that must equal the run_started event's (the first-known values).
STARTED_FIELDS = ("run_id", "task", "level", "agent", "agent_digest", "driver", "mode", "seed",
                  "backend", "isolation", "base_model", "data", "bundle_digest", "spec_hash",
                  "budget", "scoring", "versions")
# run.json keys that must equal the last run_finished event's (the scores).
FINISHED_FIELDS = ("baseline_score", "best_score", "final_score", "submissions",
                   "valid_submissions", "status", "final_split_score", "final_split_baseline",
                   "selection_gap")


def _same(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def run_json_problems(record: RunRecord) -> list[tuple[str, int | None, str]]:
    """(file, line, problem): run.json values that differ from the events that recorded them."""
    problems: list[tuple[str, int | None, str]] = []
    started = record.first_event("run_started")
    if started is None:
        return [("events.jsonl", None, "no run_started event")]
    line = record.first_payload(RunStarted).line  # type: ignore[union-attr]
    data = started.get("data") or {}
    for key in STARTED_FIELDS:
        if key in data and key in record.run and not _same(record.run[key], data[key]):
            problems.append(("run.json", None, f"{key} {_short(record.run[key])} differs from "
                             f"the run_started event's {_short(data[key])} (line "
                             f"{line})"))
        elif key in data and data[key] is not None and key not in record.run:
            problems.append(("run.json", None, f"{key} is missing (run_started recorded "
                                               f"{_short(data[key])})"))
    finished = record.events_of("run_finished")
    if finished:
        last = finished[-1]
        done = last.get("data") or {}
        line = record.payloads(RunFinished)[-1].line
        for key in FINISHED_FIELDS:
            if key in done and not _same(record.run.get(key), done[key]):
                problems.append(("run.json", None, f"{key} {_short(record.run.get(key))} "
                                 f"differs from the run_finished event's {_short(done[key])} "
                                 f"(line {line})"))
    return problems


def split_fingerprint(path: Path) -> tuple[str, int]:
    """The fingerprint of a JSONL split as the runtime computes it (runtime/data/records.py):
    sha256 of its records as canonical JSON lines; and the number of records."""
    lines = [json.loads(raw) for raw in path.read_bytes().splitlines() if raw.strip()]
    return sha256_bytes(b"".join(canonical_json(r) + b"\n" for r in lines)), len(lines)


@dataclass(frozen=True)
class AgentSplitPrint(Record):
    """What run_started (else run.json) records of the agent split in its `data`."""

    agent_fingerprint: Any = None
    agent_records: Any = None


def data_problems(record: RunRecord) -> list[tuple[str, int | None, str]]:
    """The agent split (data/train.jsonl) against the fingerprint run_started recorded."""
    started = record.first_payload(RunStarted)
    data = (started.data.data if started else None) or record.info.data or {}
    split = AgentSplitPrint.from_dict(data) if isinstance(data, dict) else AgentSplitPrint()
    want = split.agent_fingerprint
    if not want:
        return []
    path = RunPaths(record.root).train
    if not path.is_file():
        return [("data/train.jsonl", None, "missing, but the record fingerprints an agent split")]
    try:
        have, count = split_fingerprint(path)
    except (OSError, ValueError) as exc:
        return [("data/train.jsonl", None, f"unreadable: {exc}")]
    if have != want:
        return [("data/train.jsonl", None, f"fingerprint {have[:16]}... differs from the "
                                           f"recorded agent_fingerprint {want[:16]}...")]
    if split.agent_records is not None and count != split.agent_records:
        return [("data/train.jsonl", None, f"{count} records, the record says "
                                           f"{split.agent_records}")]
    return []


def driver_blob_problems(record: RunRecord) -> tuple[list[tuple[str, int | None, str]], int]:
    """(problems, bodies checked): every body a driver_call event names (request_sha256,
    response_sha256) must be in RUN/driver/blobs and hash to its name. The events are
    authenticated, so a body that hashes right is the one the gateway recorded."""
    problems: list[tuple[str, int | None, str]] = []
    checked: dict[str, bool] = {}
    blobs = RunPaths(record.root).driver_blobs
    for event in record.payloads(DriverCall):
        call = event.data
        for key, digest in (("request_sha256", call.request_sha256),
                            ("response_sha256", call.response_sha256)):
            if digest is None:
                continue
            rel = f"driver/blobs/{digest}"
            where = f"driver call {call.seq} ({key}, events.jsonl line {event.line})"
            if not isinstance(digest, str) or len(digest) != 64 or \
                    any(c not in "0123456789abcdef" for c in digest):
                problems.append(("events.jsonl", event.line,
                                 f"{where}: {digest!r} is not a sha256"))
                continue
            if digest in checked:       # the same body named twice: reported once
                continue
            path = blobs / digest
            if path.is_symlink() or not path.is_file():
                problems.append((rel, None, f"missing, but {where} names it"))
                checked[digest] = False
                continue
            have = _sha256_file(path)
            checked[digest] = have == digest
            if have != digest:
                problems.append((rel, None, f"altered: its content hashes to {have[:16]}... "
                                            f"({where})"))
    return problems, sum(1 for ok in checked.values() if ok)


def _sha256_file(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def seal_problems(record: RunRecord) -> list[tuple[str, int | None, str]]:
    return [(rel, None, message) for rel, message in check_seals(record.root, record.events)]
