"""A run's trajectory (RUN/trajectory.json, a2c.contracts.trajectory; docs/trajectory.md), built
from the driver gateway's call record and enriched from the scaffold's native transcript.

The gateway's record is the one source that is the same for every scaffold: each `driver_call`
event (in order) names its request and response bodies in RUN/driver/blobs. Each request repeats
the conversation so far; per conversation thread (a scaffold's side calls — a title, a quota
probe — start threads of their own) only the items not seen before count: new tool results
become the observations of the earlier step whose tool calls they answer, a new user message a
user step, and each call's answer one agent step with the call's tokens and cost. A step that
cannot be read is kept with what is known. A shell command written as a ```bash block in the
message (mini-swe-agent) counts as a tool call, and the next user message as its output.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from a2c import __version__
from a2c.canonical import canonical_json, sha256_bytes
from a2c.contracts.bundle import read_manifest
from a2c.contracts.events import read_events_tolerant
from a2c.contracts.records import read_jsonl_tolerant
from a2c.contracts.run_info import read_run_mapping
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.trajectory import (
    ATIF_VERSION,
    TRAJECTORY_FORMAT,
    AgentInfo,
    FinalMetrics,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
    validate_trajectory,
)
from a2c.fsutil import write_text_atomic
from a2c.timefmt import iso_utc, parse_time
from a2c.wires import Item, Turn, generation_call, wire_for_path
from a2c.wires import ToolCall as WireCall
from a2c.wires.content import text_of
from a2c.wires.reading import request_items, response_turn

MAX_BLOB = 64 << 20
# The gateway's own refusals (runtime/driver_gateway/server.py): never forwarded upstream.
REFUSED = ("auth", "not_served", "bad_request", "model", "budget")
BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)```", re.DOTALL)
SUBMIT = re.compile(r"(?:^|[\s;&|(])(?:\./|\S*/)?submit(?:\s|$)")

TOOL_KINDS: dict[str, tuple[str, ...]] = {
    "shell": ("bash", "shell", "run_shell_command", "exec_command", "local_shell",
              "execute_bash", "execute_command", "run_command", "terminal", "shell_command",
              "bashoutput", "killshell", "write_stdin", "container.exec"),
    "edit": ("write", "edit", "multiedit", "write_file", "replace", "apply_patch",
             "str_replace_editor", "str_replace_based_edit_tool", "notebookedit", "patch",
             "create_file", "edit_file", "file_editor"),
    "read": ("read", "read_file", "read_many_files", "view", "cat", "view_image"),
    "search": ("grep", "glob", "ls", "list", "list_directory", "search_file_content",
               "find", "codebase_search", "list_dir", "search"),
    "web": ("webfetch", "websearch", "web_fetch", "google_web_search", "web_search", "fetch"),
    "plan": ("todowrite", "todoread", "update_plan", "task", "exitplanmode", "think",
             "save_memory"),
}
KIND_OF = {name: kind for kind, names in TOOL_KINDS.items() for name in names}


def tool_kind(name: str, arguments: dict[str, Any]) -> str:
    key = (name or "").strip().lower()
    if key in KIND_OF:
        return KIND_OF[key]
    if "command" in arguments or "cmd" in arguments:
        return "shell"
    return "other"


def shell_command(name: str, arguments: dict[str, Any]) -> str | None:
    """The command line of a shell tool call (Codex's ["bash", "-lc", "..."] as its script)."""
    for key in ("command", "cmd", "script"):
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) >= 3 and value[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and \
                    value[1] in ("-lc", "-c"):
                return value[2]
            return " ".join(value)
    return None


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else 0.0


def metrics_of(call: dict[str, Any]) -> dict[str, Any]:
    """ATIF metrics of one driver call. The gateway counts input tokens apart from cache reads
    and writes (runtime/driver_gateway: `input_tokens` are the uncached ones); ATIF's
    `prompt_tokens` is the whole prompt, cached part included, so it is their sum, and
    `cached_tokens` the cache reads. The gateway's own fields are kept in `extra`."""
    fresh, read, write = (_int(call.get(k)) for k in ("input_tokens", "cache_read_tokens",
                                                       "cache_write_tokens"))
    return {"prompt_tokens": fresh + read + write,
            "completion_tokens": _int(call.get("output_tokens")),
            "cached_tokens": read, "cost_usd": _float(call.get("cost_usd")),
            "extra": {"input_tokens": fresh, "cache_write_tokens": write}}


def submits(command: str | None) -> bool:
    return bool(command) and bool(SUBMIT.search(command or ""))


# ----------------------------------------------------------------------------- reading
def _blob(paths: RunPaths, digest: Any, warnings: list[str], seq: Any) -> bytes | None:
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        return None
    path = paths.driver_blobs / digest
    try:
        if path.stat().st_size > MAX_BLOB:
            warnings.append(f"driver call {seq}: body {digest[:12]} is over {MAX_BLOB} bytes")
            return None
        return path.read_bytes()
    except OSError:
        warnings.append(f"driver call {seq}: body {digest[:12]} is missing from driver/blobs")
        return None


def _wire_of(call: dict[str, Any]) -> str | None:
    """The wire a recorded call spoke: as recorded, else as the gateway routes its path."""
    wire = wire_for_path(call.get("path"))
    return call.get("wire") or (wire.name if wire else None)


def _fp(item: Item) -> str:
    """What makes a conversation item the same item when a later request repeats it."""
    kind = item.kind
    if kind == "assistant":
        # By the calls' names and arguments, not their ids: some scaffolds give the model's
        # id-less calls ids of their own when they repeat them (Gemini CLI).
        if item.tool_calls:
            return "assistant:" + "|".join(_signature(c) for c in item.tool_calls)
        return "assistant:" + sha256_bytes((item.text or "").strip().encode())
    if kind == "tool_result":
        key = item.call_id or f"{item.name}:{item.content}"
        return f"tool_result:{key}"
    return f"{kind}:" + sha256_bytes((item.text or "").strip().encode())


def _signature(call: WireCall) -> str:
    return f"{call.name}:{canonical_json(call.arguments or {}).decode()}"


class _Thread:
    def __init__(self, number: int, key: str, first: str):
        self.number = number
        self.key = key
        self.first = first
        self.seen: Counter[str] = Counter()
        self.calls = 0
        self.last_agent: dict[str, Any] | None = None
        self.pending_by_name: dict[str, list[dict[str, Any]]] = {}
        self.synth_by_sig: dict[str, list[dict[str, Any]]] = {}


def _thread_key(items: list[Item]) -> tuple[str, str]:
    system = next((i for i in items if i.kind == "system"), None)
    first = next((i for i in items if i.kind == "user"), None)
    key = "|".join(_fp(i) for i in (system, first) if i is not None)
    return key, (first.text if first else "")[:120]


class _Builder:
    def __init__(self, run_dir: Path):
        self.paths = RunPaths(run_dir)
        self.steps: list[dict[str, Any]] = []
        self.threads: dict[str, _Thread] = {}
        self.calls: dict[str, dict[str, Any]] = {}   # tool_call_id -> the step holding it
        self.warnings: list[str] = []
        self.synth = 0

    # -------------------------------------------------------------- steps
    def add_step(self, source: str, message: str, ts: str | None, **extra: Any) -> dict:
        step: dict[str, Any] = {"step_id": len(self.steps) + 1, "source": source,
                                "message": message or "", "timestamp": ts, "tool_calls": [],
                                "results": [], "extra": {k: v for k, v in extra.items()
                                                         if v is not None}}
        self.steps.append(step)
        return step

    def observe(self, thread: _Thread, item: Item, ts: str | None) -> None:
        """A tool result: an observation of the step whose call it answers."""
        call_id = item.call_id
        owner = self.calls.get(call_id) if call_id else None
        if owner is None and item.name:      # Gemini: calls without ids, by name
            queue = thread.pending_by_name.get(item.name) or []
            if queue:
                call = queue.pop(0)
                call_id, owner = call["tool_call_id"], self.calls.get(call["tool_call_id"])
        elif owner is not None:
            for queue in thread.pending_by_name.values():
                queue[:] = [c for c in queue if c["tool_call_id"] != call_id]
        if owner is None:
            owner = thread.last_agent
        result = {"source_call_id": call_id, "content": item.content or ""}
        extra = {"is_error": True} if item.is_error else {}
        if owner is not None and call_id and any(r["source_call_id"] == call_id
                                                 for r in owner["results"]):
            return          # the same result, repeated by a request of another thread
        if owner is None:
            step = self.add_step("user", "", ts, thread=thread.number)
            step["results"].append({**result, "extra": extra or None})
            return
        owner["results"].append({**result, "extra": extra or None})

    def agent_turn(self, thread: _Thread, turn: Turn, event: dict[str, Any],
                   call: dict[str, Any]) -> dict[str, Any]:
        step = self.add_step("agent", turn.text or "", event.get("ts"),
                             call_seq=call.get("seq"), thread=thread.number,
                             wire=call.get("wire"), status=call.get("status"),
                             error=call.get("error"), latency_ms=call.get("latency_ms"),
                             duration_ms=call.get("duration_ms"),
                             stop_reason=turn.stop)
        step["model_name"] = call.get("response_model") or turn.model or call.get("model")
        step["reasoning"] = turn.reasoning or None
        calls = turn.tool_calls or self._text_actions(turn.text or "")
        for c in calls:
            if not c.id:
                self.synth += 1
                c = dataclasses.replace(c, id=f"a2c-call-{self.synth}")
            args = c.arguments if isinstance(c.arguments, dict) else {}
            kind = tool_kind(c.name or "", args)
            command = shell_command(c.name or "", args) if kind == "shell" else None
            extra = {"kind": kind}
            if command is not None:
                extra["command"] = command
                if submits(command):
                    extra["submits"] = True
            if c.from_message:
                extra["parsed_from"] = "message"
            entry = {"tool_call_id": c.id, "function_name": c.name or "",
                     "arguments": args, "extra": extra}
            step["tool_calls"].append(entry)
            self.calls[c.id] = step
            if c.synth or c.from_message:
                thread.pending_by_name.setdefault(c.name or "", []).append(entry)
                thread.synth_by_sig.setdefault(_signature(c), []).append(entry)
        step["metrics"] = metrics_of(call)
        thread.last_agent = step
        return step

    @staticmethod
    def _text_actions(text: str) -> list[WireCall]:
        blocks = BASH_BLOCK.findall(text or "")
        return [WireCall("", "bash", {"command": b.strip()}, from_message=True)
                for b in blocks[:1] if b.strip()]

    # -------------------------------------------------------------- one call
    def call(self, event: dict[str, Any]) -> None:
        call = event.get("data") if isinstance(event.get("data"), dict) else {}
        wire = _wire_of(call)
        if not generation_call(wire, call.get("path")):
            return
        seq = call.get("seq")
        raw_request = _blob(self.paths, call.get("request_sha256"), self.warnings, seq)
        raw_response = _blob(self.paths, call.get("response_sha256"), self.warnings, seq)
        try:
            body = json.loads(raw_request) if raw_request else None
        except ValueError:
            body = None
            self.warnings.append(f"driver call {seq}: the request body is not JSON")
        items = request_items(wire, body)
        key, first = _thread_key(items)
        thread = self.threads.get(key) or self._closest_thread(items)
        if thread is None:
            thread = self.threads[key] = _Thread(len(self.threads), key, first)
        thread.calls += 1
        end = parse_time(event.get("ts"))
        start = iso_utc(end - float(call["duration_ms"]) / 1000) if end is not None and \
            isinstance(call.get("duration_ms"), (int, float)) else event.get("ts")
        seen_now: Counter[str] = Counter()
        for item in items:
            fp = _fp(item)
            seen_now[fp] += 1
            if seen_now[fp] <= thread.seen[fp]:
                if item.kind == "assistant":
                    self._adopt_ids(thread, item)
                continue
            thread.seen[fp] += 1
            if item.kind == "tool_result":
                self.observe(thread, item, start)
            elif item.kind == "assistant":
                # An agent turn this record did not see answered (a pre-seeded history, or an
                # echo that differs from the response): kept, marked.
                if any(c.id in self.calls for c in item.tool_calls):
                    continue
                step = self.add_step("agent", item.text or "", start,
                                     thread=thread.number, from_request=True)
                step["reasoning"] = item.reasoning or None
                for c in item.tool_calls:
                    args = c.arguments or {}
                    kind = tool_kind(c.name or "", args)
                    extra = {"kind": kind}
                    command = shell_command(c.name or "", args) if kind == "shell" else None
                    if command:
                        extra["command"] = command
                    entry = {"tool_call_id": c.id or "", "function_name": c.name or "",
                             "arguments": args, "extra": extra}
                    step["tool_calls"].append(entry)
                    if c.id:
                        self.calls[c.id] = step
                thread.last_agent = step
            else:
                pending = self._pending_text_call(thread)
                if item.kind == "user" and pending is not None:
                    thread.last_agent["results"].append(
                        {"source_call_id": pending["tool_call_id"], "content": item.text,
                         "extra": None})
                else:
                    self.add_step(item.kind, item.text or "", start,
                                  thread=thread.number)
        turn = response_turn(wire, raw_response)
        if raw_response is not None and not (turn.text or turn.tool_calls) and \
                _int(call.get("status")) < 400 and not call.get("error"):
            self.warnings.append(f"driver call {seq}: no message or tool call read from the "
                                 f"response ({'stream' if call.get('stream') else 'JSON'})")
        step = self.agent_turn(thread, turn, event, call)
        if turn.text or turn.tool_calls:
            thread.seen[_fp(Item.assistant(turn))] += 1
        del step  # recorded in self.steps

    def _closest_thread(self, items: list[Item]) -> _Thread | None:
        """The thread a request continues whose opening changed (a scaffold rewriting its
        environment message): the one that has seen most of its items, if that is most of
        them."""
        if len(items) < 3:
            return None
        best, best_seen = None, 0
        for thread in self.threads.values():
            seen = sum(1 for item in items if thread.seen[_fp(item)] > 0)
            if seen > best_seen:
                best, best_seen = thread, seen
        return best if best_seen * 2 > len(items) else None

    def _adopt_ids(self, thread: _Thread, item: Item) -> None:
        """A repeated turn whose calls now carry ids the answer did not (the scaffold named
        them): the steps' calls take those ids, so the results that quote them find them."""
        for call in item.tool_calls:
            real = call.id
            if not real or call.synth or real in self.calls:
                continue
            queue = thread.synth_by_sig.get(_signature(call)) or []
            if not queue:
                continue
            entry = queue.pop(0)
            step = self.calls.pop(entry["tool_call_id"], None)
            entry["tool_call_id"] = real
            if step is not None:
                self.calls[real] = step

    def _pending_text_call(self, thread: _Thread) -> dict[str, Any] | None:
        last = thread.last_agent
        if last is None or last is not (self.steps[-1] if self.steps else None):
            return None
        for call in last["tool_calls"]:
            if (call.get("extra") or {}).get("parsed_from") == "message" and not any(
                    r["source_call_id"] == call["tool_call_id"] for r in last["results"]):
                return call
        return None


# ----------------------------------------------------------------------------- native transcripts
EXIT_PATTERNS = (re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
                 re.compile(r"Process exited with code (-?\d+)"),
                 re.compile(r"(?:^|\n)Exit code:?\s*(-?\d+)"),
                 re.compile(r"\bexit(?:_code| code| status)[\"':= ]+(-?\d+)", re.IGNORECASE))


def _exit_code(content: str) -> int | None:
    """The exit code a tool output states (Codex's JSON output metadata, mini-swe-agent's
    <returncode>, "Exit code: N")."""
    text = content.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else data
            for key in ("exit_code", "exitCode", "exit", "returncode"):
                if isinstance(meta.get(key), int):
                    return meta[key]
    for pattern in EXIT_PATTERNS:
        found = pattern.search(content[:4000])
        if found:
            return int(found.group(1))
    return None


def transcript_path(run_dir: Path, run: dict[str, Any]) -> Path | None:
    named = run.get("transcript") if isinstance(run.get("transcript"), str) else None
    candidates = []
    if named:
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
        for file in files[:200]:
            out += _transcript_objects(file)
        return out
    try:
        raw = path.read_bytes()[:MAX_BLOB]
    except OSError:
        return []
    try:
        return [json.loads(raw)]
    except ValueError:
        rows, _ = read_jsonl_tolerant(path)
        return rows


def _walk(value: Any, depth: int = 0):
    if depth > 12:
        return
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _walk(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, depth + 1)


def native_results(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """({tool call id: {content, is_error, exit_code}}, {command: {exit_code, content}}) from a
    native transcript: Claude Code stream-json (tool_result blocks), OpenCode JSON events
    (callID + state.output/metadata.exit), Codex --json (command_execution items with
    exit_code), Gemini stream-json (tool_result events), mini-swe-agent trajectories."""
    by_id: dict[str, dict[str, Any]] = {}
    by_command: dict[str, dict[str, Any]] = {}
    for obj in _transcript_objects(path):
        for d in _walk(obj):
            if isinstance(d.get("tool_use_id"), str) and "content" in d:
                by_id[d["tool_use_id"]] = {"content": text_of(d["content"]),
                                           "is_error": bool(d.get("is_error"))}
            ident = d.get("callID") or d.get("call_id") or d.get("tool_call_id") or \
                d.get("tool_id")
            state = d.get("state") if isinstance(d.get("state"), dict) else d
            if isinstance(ident, str) and d.get("role") == "tool" and "content" in d:
                extra = d.get("extra") if isinstance(d.get("extra"), dict) else {}
                code = extra.get("returncode")
                by_id[ident] = {"content": text_of(d["content"]),
                                **({"exit_code": code} if isinstance(code, int) else {})}
            elif isinstance(ident, str) and ("output" in state or "result" in state):
                meta = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
                code = meta.get("exit", meta.get("exit_code", state.get("exit_code")))
                by_id.setdefault(ident, {}).update(
                    {"content": text_of(state.get("output", state.get("result"))),
                     **({"exit_code": code} if isinstance(code, int) else {}),
                     **({"is_error": True} if state.get("status") in ("error", "failed")
                        else {})})
            if isinstance(d.get("command"), str) and isinstance(d.get("exit_code"), int):
                by_command[d["command"].strip()] = {
                    "exit_code": d["exit_code"],
                    "content": text_of(d.get("aggregated_output") or d.get("output"))}
    for ident in list(by_id):       # Gemini CLI's "<tool>__<id>" names the wire's "<id>"
        if "__" in ident:
            by_id.setdefault(ident.split("__", 1)[1], by_id[ident])
    return by_id, by_command


def _enrich(steps: list[dict[str, Any]], path: Path | None) -> bool:
    by_id, by_command = native_results(path) if path else ({}, {})
    used = False
    for step in steps:
        for result in step["results"]:
            extra = dict(result.get("extra") or {})
            native = by_id.get(result["source_call_id"] or "")
            if native:
                if len(native.get("content") or "") > len(result["content"]):
                    result["content"] = native["content"]
                    extra["source"] = "transcript"
                for key in ("exit_code", "is_error"):
                    if native.get(key) is not None and key not in extra:
                        extra[key] = native[key]
                used = True
            if "exit_code" not in extra:
                code = _exit_code(result["content"])
                if code is not None:
                    extra["exit_code"] = code
            result["extra"] = extra or None
        for call in step["tool_calls"]:
            command = (call.get("extra") or {}).get("command")
            native = by_command.get((command or "").strip())
            if native is None:
                for candidate, value in by_command.items():
                    if command and command.strip() and command.strip() in candidate:
                        native = value
                        break
            if native is None:
                continue
            used = True
            result = next((r for r in step["results"]
                           if r["source_call_id"] == call["tool_call_id"]), None)
            if result is None:
                step["results"].append({"source_call_id": call["tool_call_id"],
                                        "content": native.get("content") or "",
                                        "extra": {"exit_code": native["exit_code"],
                                                  "source": "transcript"}})
            else:
                result["extra"] = {**(result.get("extra") or {}),
                                   "exit_code": native["exit_code"]}
    return used


# ----------------------------------------------------------------------------- assembling
def _read_run(run_dir: Path) -> dict[str, Any]:
    try:
        return read_run_mapping(run_dir)
    except (OSError, ValueError):
        return {}


def _events(run_dir: Path) -> list[dict[str, Any]]:
    rows, _ = read_events_tolerant(run_dir)
    return rows


def _final(events: list[dict[str, Any]], steps: list[dict[str, Any]],
           threads: list[_Thread]) -> dict[str, Any]:
    calls = [e.get("data") or {} for e in events if e.get("type") == "driver_call"]

    def total(key: str) -> int:
        return sum(_int(c.get(key)) for c in calls)

    kinds: Counter[str] = Counter()
    names: Counter[str] = Counter()
    for step in steps:
        for call in step["tool_calls"]:
            kinds[(call.get("extra") or {}).get("kind", "other")] += 1
            names[call["function_name"]] += 1
    models: Counter[str] = Counter(str(c.get("response_model") or c.get("model"))
                                   for c in calls if c.get("response_model") or c.get("model"))
    exhausted = [{k: (e.get("data") or {}).get(k) for k in ("limit", "budget", "used", "seq")}
                 | {"timestamp": e.get("ts")}
                 for e in events if e.get("type") == "driver_budget_exhausted"]
    errors = sum(1 for c in calls if _int(c.get("status")) >= 400 or
                 (c.get("error") and c.get("error") != "client_gone"))
    refused = sum(1 for c in calls if c.get("error") in REFUSED)
    forwarded = sum(1 for c in calls if c.get("error") not in REFUSED and generation_call(
        _wire_of(c), c.get("path")))
    return {"total_prompt_tokens": total("input_tokens") + total("cache_read_tokens")
            + total("cache_write_tokens"),
            "total_completion_tokens": total("output_tokens"),
            "total_cached_tokens": total("cache_read_tokens"),
            "total_cost_usd": round(sum(_float(c.get("cost_usd")) for c in calls), 10),
            "total_steps": len(steps),
            "extra": {"calls": forwarded, "refused": refused, "recorded": len(calls),
                      "errors": errors,
                      "input_tokens": total("input_tokens"),
                      "cache_write_tokens": total("cache_write_tokens"),
                      "tokens": sum(total(k) for k in ("input_tokens", "output_tokens",
                                                       "cache_read_tokens",
                                                       "cache_write_tokens")),
                      "models": dict(models.most_common()),
                      "budget_exhausted": exhausted,
                      "tool_calls_by_kind": dict(sorted(kinds.items())),
                      "tool_calls_by_name": dict(names.most_common()),
                      "threads": [{"thread": t.number, "calls": t.calls, "first_message": t.first}
                                  for t in threads]}}


def _to_record(step: dict[str, Any]) -> Step:
    results = [ObservationResult(source_call_id=r["source_call_id"], content=r["content"],
                                 extra=r.get("extra") or None) for r in step["results"]]
    calls = [ToolCall(tool_call_id=c["tool_call_id"], function_name=c["function_name"],
                      arguments=c["arguments"], extra=c.get("extra") or None)
             for c in step["tool_calls"]]
    metrics = step.get("metrics")
    return Step(step_id=step["step_id"], source=step["source"], message=step["message"],
                timestamp=step.get("timestamp"), model_name=step.get("model_name"),
                reasoning_content=step.get("reasoning"),
                tool_calls=calls or None,
                observation=Observation(results) if results else None,
                metrics=Metrics(**metrics) if metrics else None,
                extra=step.get("extra") or None)


def _agent_version(root: Path, run: dict[str, Any], started: dict[str, Any]) -> str:
    """The scaffold's version from the agent bundle (RUN/agent/agent.json) when it names one,
    else the agent bundle's digest (short), else "unknown"."""
    try:
        manifest = read_manifest(RunPaths(root).agent, "Agent")
    except (OSError, ValueError):
        manifest = {}
    spec = manifest.get("agent") if isinstance(manifest, dict) else None
    if isinstance(spec, dict):
        for key in ("version", "cli_version"):
            if isinstance(spec.get(key), (str, int, float)):
                return str(spec[key])
    digest = run.get("agent_digest") or started.get("agent_digest")
    return str(digest)[:16] if digest else "unknown"


def build_trajectory(run_dir: str | Path) -> dict[str, Any]:
    """The run's trajectory as a dict that validates against trajectory.schema.json (never
    raises on a damaged or unknown record: what could not be read is in extra.warnings)."""
    root = Path(run_dir)
    run = _read_run(root)
    events = _events(root)
    builder = _Builder(root)
    for event in events:
        if event.get("type") == "driver_call":
            try:
                builder.call(event)
            except Exception as exc:  # noqa: BLE001 - a record must never stop the report
                seq = (event.get("data") or {}).get("seq")
                builder.warnings.append(f"driver call {seq}: not read ({type(exc).__name__}: "
                                        f"{exc})")
        elif event.get("type") == "driver_budget_exhausted":
            data = event.get("data") or {}
            builder.add_step("system", f"driver budget exhausted: {data.get('limit')} "
                             f"{data.get('used')} of {data.get('budget')}", event.get("ts"),
                             event="driver_budget_exhausted")
    transcript = transcript_path(root, run)
    try:
        enriched = _enrich(builder.steps, transcript)
    except Exception as exc:  # noqa: BLE001
        enriched = False
        builder.warnings.append(f"{transcript}: not read ({type(exc).__name__}: {exc})")
    threads = sorted(builder.threads.values(), key=lambda t: t.number)
    final = _final(events, builder.steps, threads)
    started = next((e.get("data") or {} for e in events if e.get("type") == "run_started"), {})
    models = final["extra"]["models"]
    sources = ["driver"] + ([f"transcript:{transcript.relative_to(root).as_posix()}"]
                            if transcript and enriched else [])
    wires = sorted({(e.get("data") or {}).get("wire") for e in events
                    if e.get("type") == "driver_call" and (e.get("data") or {}).get("wire")})
    trajectory = Trajectory(
        session_id=str(run.get("run_id") or started.get("run_id") or root.name),
        agent=AgentInfo(name=str(run.get("agent") or started.get("agent") or "unknown"),
                        version=_agent_version(root, run, started),
                        model_name=next(iter(models), None),
                        extra={"driver": run.get("driver") or started.get("driver")}),
        steps=[_to_record(s) for s in builder.steps],
        notes="Built by a2c from the driver gateway's call record (driver_call events and "
              "driver/blobs); prompt_tokens is the whole prompt (the gateway's uncached "
              "input_tokens + cache_read_tokens + cache_write_tokens), cached_tokens its "
              "cache_read_tokens. See docs/trajectory.md.",
        final_metrics=FinalMetrics(**final),
        extra={"run_id": run.get("run_id") or started.get("run_id"),
               "task": run.get("task") or started.get("task"),
               "driver": run.get("driver") or started.get("driver"), "wires": wires,
               "sources": sources, "warnings": builder.warnings[:200],
               "a2c_version": __version__})
    out = trajectory.to_dict()
    out["format"], out["schema_version"] = TRAJECTORY_FORMAT, ATIF_VERSION
    return out


def trajectory_problems(run_dir: str | Path) -> list[str]:
    """How RUN/trajectory.json departs from what the run's record builds (empty when it
    matches, or when there is none): the schema, then — written by this a2c version — every
    step and total; written by another version, the totals (which do not depend on how a
    version reads the bodies). The driver record itself is checked apart (driver/blobs)."""
    root = Path(run_dir)
    path = RunPaths(root).trajectory
    if not path.is_file():
        return []
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return [f"not readable JSON ({exc})"]
    problems = validate_trajectory(stored)
    if problems:
        return [f"does not validate: {problems[0]}"]
    built = build_trajectory(root)
    version = (stored.get("extra") or {}).get("a2c_version")
    if version == __version__:
        for key in ("session_id", "agent", "final_metrics"):
            if canonical_json(stored.get(key)) != canonical_json(built.get(key)):
                return [f"{key} differs from what the driver record builds"]
        if len(stored["steps"]) != len(built["steps"]):
            return [f"{len(stored['steps'])} steps, the driver record builds "
                    f"{len(built['steps'])}"]
        for have, want in zip(stored["steps"], built["steps"]):
            if canonical_json(have) != canonical_json(want):
                return [f"step {have.get('step_id')} differs from what the driver record builds"]
        return []
    totals = ("total_prompt_tokens", "total_completion_tokens", "total_cached_tokens")
    have = stored.get("final_metrics") or {}
    want = built.get("final_metrics") or {}
    for key in totals:
        if have.get(key) != want.get(key):
            return [f"final_metrics.{key} {have.get(key)!r} differs from the driver record's "
                    f"{want.get(key)!r} (written by a2c {version})"]
    if abs(float(have.get("total_cost_usd") or 0) - float(want.get("total_cost_usd") or 0)) > 1e-9:
        return [f"final_metrics.total_cost_usd {have.get('total_cost_usd')!r} differs from the "
                f"driver record's {want.get('total_cost_usd')!r} (written by a2c {version})"]
    return []


def write_trajectory(run_dir: str | Path) -> Path:
    """Build the trajectory and write RUN/trajectory.json (atomic, 0600 like the record);
    returns its path. Raises ValueError if what was built does not validate (a bug)."""
    root = Path(run_dir)
    data = build_trajectory(root)
    problems = validate_trajectory(data)
    if problems:
        raise ValueError(f"{root}: the trajectory built does not validate: {problems[0]}")
    path = RunPaths(root).trajectory
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n", mode=0o600)
    return path


def maybe_write_trajectory(run_dir: str | Path) -> Path | None:
    """After any run (the CLI's call once `a2c run` / a sweep trial / a resume ends): write
    RUN/trajectory.json when the run's agent called a driver through the gateway; None when it
    did not (a scripted agent) or the trajectory could not be written (never raises: the run
    is over and recorded either way; `a2c verify` names a stale or missing-body record)."""
    root = Path(run_dir)
    try:
        rows, _ = read_events_tolerant(root)
        if not any(r.get("type") == "driver_call" for r in rows):
            return None
        return write_trajectory(root)
    except (OSError, ValueError):
        return None
