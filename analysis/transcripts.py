"""The scaffold's own transcript (RUN/logs/transcript.*, or the file run.json names), read to
enrich the trajectory built from the driver record: a tool's whole output where the request the
scaffold sent back held a shortened one, and the exit codes the driver never sees.

Every CLI writes its own format — Claude Code stream-json (tool_result blocks), OpenCode JSON
events (callID + state.output/metadata.exit), Codex --json (command_execution items with
exit_code), Gemini stream-json (tool_result events), mini-swe-agent trajectories — so the
reader walks any JSON it finds for the few shapes that carry a tool's result; what it cannot
read it skips.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.contracts.native_transcript import ToolObject, stated_exit_code
from a2c.contracts.records import read_jsonl_tolerant
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.trajectory import ResultExtra
from a2c.wires.content import text_of

from .step_drafts import DraftCall, DraftResult, DraftStep

MAX_TRANSCRIPT = 64 << 20
MAX_FILES = 200
EXIT_PATTERNS = (re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
                 re.compile(r"Process exited with code (-?\d+)"),
                 re.compile(r"(?:^|\n)Exit code:?\s*(-?\d+)"),
                 re.compile(r"\bexit(?:_code| code| status)[\"':= ]+(-?\d+)", re.IGNORECASE))


@dataclass(frozen=True)
class NativeResult:
    """One tool result as the scaffold's transcript has it."""

    content: str | None = None
    is_error: bool | None = None
    exit_code: int | None = None


def exit_code_of(content: str) -> int | None:
    """The exit code a tool output states (Codex's JSON output metadata, mini-swe-agent's
    <returncode>, "Exit code: N")."""
    text = content.strip()
    if text.startswith("{"):
        try:
            code = stated_exit_code(json.loads(text))
        except ValueError:
            code = None
        if code is not None:
            return code
    for pattern in EXIT_PATTERNS:
        found = pattern.search(content[:4000])
        if found:
            return int(found.group(1))
    return None


def transcript_path(run_dir: Path, named: str | None) -> Path | None:
    """The transcript run.json names (`transcript`), else RUN/logs/transcript.*; only a path
    inside the run directory, and not a link."""
    candidates = []
    if isinstance(named, str) and named:
        candidates.append(Path(named) if Path(named).is_absolute() else run_dir / named)
    candidates += sorted(RunPaths(run_dir).logs.glob("transcript.*"))
    for path in candidates:
        try:
            if (path.is_file() or path.is_dir()) and not path.is_symlink() and \
                    run_dir.resolve() in path.resolve().parents:
                return path
        except OSError:
            continue
    return None


def _transcript_objects(path: Path) -> list[Any]:
    """The JSON values of a transcript: one document, or one per line (lines that are not JSON
    skipped); a folder (a copied session directory): those of each file in it."""
    if path.is_dir():
        out: list[Any] = []
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
        for file in files[:MAX_FILES]:
            out += _transcript_objects(file)
        return out
    try:
        raw = path.read_bytes()[:MAX_TRANSCRIPT]
    except OSError:
        return []
    try:
        return [json.loads(raw)]
    except ValueError:
        rows, _ = read_jsonl_tolerant(path)
        return rows


def _walk(value: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    if depth > 12:
        return
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, depth + 1)


def _read_object(d: dict[str, Any], by_id: dict[str, NativeResult],
                 by_command: dict[str, NativeResult]) -> None:
    """The tool results one JSON object of a transcript holds (its shapes typed by
    a2c.contracts.native_transcript)."""
    shapes = ToolObject.of(d)
    if shapes.claude:
        by_id[shapes.claude.tool_use_id] = NativeResult(text_of(shapes.claude.content),
                                                        bool(shapes.claude.is_error))
    if shapes.message:
        by_id[shapes.message.ident] = NativeResult(text_of(shapes.message.content),
                                                   exit_code=shapes.message.exit_code)
    elif shapes.state:
        state = shapes.state
        known = by_id.get(state.ident) or NativeResult()
        by_id[state.ident] = dataclasses.replace(
            known, content=text_of(state.output),
            exit_code=state.exit_code if state.exit_code is not None else known.exit_code,
            is_error=True if state.failed else known.is_error)
    if shapes.command:
        by_command[shapes.command.command.strip()] = NativeResult(
            text_of(shapes.command.output), exit_code=shapes.command.exit_code)


def native_results(path: Path) -> tuple[dict[str, NativeResult], dict[str, NativeResult]]:
    """({tool call id: result}, {command: result}) from a native transcript."""
    by_id: dict[str, NativeResult] = {}
    by_command: dict[str, NativeResult] = {}
    for obj in _transcript_objects(path):
        for d in _walk(obj):
            _read_object(d, by_id, by_command)
    for ident in list(by_id):       # Gemini CLI's "<tool>__<id>" names the wire's "<id>"
        if "__" in ident:
            by_id.setdefault(ident.split("__", 1)[1], by_id[ident])
    return by_id, by_command


def _enrich_result(result: DraftResult, native: NativeResult | None) -> bool:
    extra = result.extra or ResultExtra()
    if native:
        if len(native.content or "") > len(result.content):
            result.content = native.content or ""
            extra = extra.replace(source="transcript")
        if native.exit_code is not None and extra.exit_code is None:
            extra = extra.replace(exit_code=native.exit_code)
        if native.is_error is not None and extra.is_error is None:
            extra = extra.replace(is_error=native.is_error)
    if extra.exit_code is None:
        extra = extra.replace(exit_code=exit_code_of(result.content))
    result.extra = extra
    return native is not None


def _by_command(call: DraftCall, by_command: dict[str, NativeResult]) -> NativeResult | None:
    command = (call.extra.command or "").strip()
    native = by_command.get(command)
    if native is None and command:
        native = next((v for k, v in by_command.items() if command in k), None)
    return native


def enrich(steps: list[DraftStep], path: Path | None) -> bool:
    """Lengthen the steps' tool outputs and add their exit codes from the transcript at `path`
    (an exit code an output states, without one); whether the transcript gave anything."""
    by_id, by_command = native_results(path) if path else ({}, {})
    used = False
    for step in steps:
        for result in step.results:
            used = _enrich_result(result, by_id.get(result.source_call_id or "")) or used
        for call in step.tool_calls:
            native = _by_command(call, by_command)
            if native is None:
                continue
            used = True
            result = step.result_of(call.tool_call_id)
            if result is None:
                step.results.append(DraftResult(
                    call.tool_call_id, native.content or "",
                    ResultExtra(exit_code=native.exit_code, source="transcript")))
            else:
                result.extra = (result.extra or ResultExtra()).replace(
                    exit_code=native.exit_code)
    return used
