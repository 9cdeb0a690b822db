"""The report's `driver` section: what the agent's driver model did, from the gateway's record
(the trajectory built from the `driver_call` events and their bodies, analysis/trajectory.py).

Model(s) as the provider named them, calls, tokens (input, output, cached), cost, whether a
driver budget ran out, tool calls by kind, the shell commands in order, for each submission the
steps that led to it (the steps after the previous submission up to this one's arrival, and the
step whose tool call ran `./submit`), and the steps themselves, clipped for reading.
"""

from __future__ import annotations

import json
from typing import Any

from a2c.contracts.run_paths import RunPaths
from a2c.timefmt import parse_time

from .record import RunRecord
from .trajectory import build_trajectory
from .values import clip

MAX_STEPS = 400
MAX_COMMANDS = 500
MESSAGE_WIDTH = 6000
ARG_WIDTH = 3000
OUTPUT_WIDTH = 3000
LONG = 600          # text longer than this is collapsed in the HTML


def _clipped(text: str | None, width: int) -> tuple[str, bool, int]:
    text = text or ""
    return clip(text, width), len(text) > width, len(text)


def _step_view(step: dict[str, Any], record: RunRecord) -> dict[str, Any]:
    extra = step.get("extra") or {}
    metrics = step.get("metrics") or {}
    message, cut, size = _clipped(step.get("message"), MESSAGE_WIDTH)
    calls = []
    for call in step.get("tool_calls") or []:
        cextra = call.get("extra") or {}
        args = call.get("arguments") or {}
        shown = cextra.get("command")
        if shown is None:
            shown = json.dumps(args, ensure_ascii=False, indent=1, sort_keys=True)
        text, args_cut, _ = _clipped(shown, ARG_WIDTH)
        calls.append({"id": call.get("tool_call_id"), "name": call.get("function_name"),
                      "kind": cextra.get("kind", "other"), "shell": "command" in cextra,
                      "text": text, "truncated": args_cut, "submits": bool(cextra.get("submits"))})
    results = []
    for result in (step.get("observation") or {}).get("results") or []:
        rextra = result.get("extra") or {}
        content, out_cut, out_size = _clipped(result.get("content"), OUTPUT_WIDTH)
        results.append({"call_id": result.get("source_call_id"), "content": content,
                        "truncated": out_cut, "chars": out_size,
                        "exit_code": rextra.get("exit_code"),
                        "is_error": bool(rextra.get("is_error")),
                        "from_transcript": rextra.get("source") == "transcript"})
    return {"step_id": step["step_id"], "source": step["source"],
            "t_s": record.rel_time(parse_time(step.get("timestamp"))),
            "message": message, "message_truncated": cut, "message_chars": size,
            "long": size > LONG, "reasoning": clip(step.get("reasoning_content") or "", 2000),
            "model": step.get("model_name"), "thread": extra.get("thread"),
            "call_seq": extra.get("call_seq"), "error": extra.get("error"),
            "status": extra.get("status"),
            "input_tokens": (metrics.get("extra") or {}).get("input_tokens",
                                                             metrics.get("prompt_tokens")),
            "output_tokens": metrics.get("completion_tokens"),
            "cached_tokens": metrics.get("cached_tokens"), "cost_usd": metrics.get("cost_usd"),
            "tool_calls": calls, "results": results, "submission": None}


def _trajectory_file(record: RunRecord) -> str | None:
    """RUN/trajectory.json, relative to the run directory, when the run has one."""
    path = RunPaths(record.root).trajectory
    return path.relative_to(record.root).as_posix() if path.is_file() else None


def served_driver(record: RunRecord) -> dict[str, Any] | None:
    """What served a `vllm/` driver a2c started (weights' digest, server version and flags,
    context, sampling), from the signed run_started event (run.json's copy for a run that
    ended before it); None for a driver a2c did not serve."""
    started = record.first_event("run_started") or {}
    server = (started.get("data") or {}).get("driver_server") or record.run.get("driver_server")
    if not isinstance(server, dict):
        return None
    weights = server.get("weights") or {}
    return {"model": server.get("model"), "served_model_name": server.get("served_model_name"),
            "weights_fingerprint": weights.get("fingerprint"), "weights_note": weights.get("note"),
            "version": server.get("version"), "argv": server.get("argv") or [],
            "max_model_len": server.get("max_model_len"),
            "tool_call_parser": server.get("tool_call_parser"),
            "chat_template": server.get("chat_template"), "gpus": server.get("gpus") or [],
            "sampling": server.get("sampling") or {}}


def driver_section(record: RunRecord, subs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """None for a run without driver calls (a scripted agent, or a record from before the
    gateway)."""
    if not record.events_of("driver_call"):
        return None
    trajectory = build_trajectory(record.root)
    final = trajectory.get("final_metrics") or {}
    fextra = final.get("extra") or {}
    steps = trajectory.get("steps") or []
    times = [parse_time(s.get("timestamp")) for s in steps]

    commands = []
    for step, ts in zip(steps, times):
        results = {r.get("source_call_id"): r for r in (step.get("observation") or {})
                   .get("results") or []}
        for call in step.get("tool_calls") or []:
            cextra = call.get("extra") or {}
            if "command" not in cextra:
                continue
            rextra = (results.get(call.get("tool_call_id")) or {}).get("extra") or {}
            commands.append({"step_id": step["step_id"], "t_s": record.rel_time(ts),
                             "command": clip(cextra["command"], 400),
                             "exit_code": rextra.get("exit_code"),
                             "submits": bool(cextra.get("submits"))})

    per_sub = []
    previous = None
    for sub in subs:
        received = parse_time(sub.get("received_at"))
        members = [s for s, ts in zip(steps, times) if ts is not None and received is not None
                   and ts <= received and (previous is None or ts > previous)]
        submit_step = next((s["step_id"] for s in reversed(members)
                            if any((c.get("extra") or {}).get("submits")
                                   for c in s.get("tool_calls") or [])), None)
        agent = [s for s in members if s["source"] == "agent"]
        per_sub.append({
            "id": sub["id"], "t_s": sub.get("t_s"), "score": sub.get("score"),
            "valid": sub.get("valid"), "steps": [s["step_id"] for s in members],
            "submit_step": submit_step, "calls": len(agent),
            "tokens": sum(int((s.get("metrics") or {}).get("prompt_tokens") or 0)
                          + int((s.get("metrics") or {}).get("completion_tokens") or 0)
                          for s in agent),   # all four kinds, as the gateway counts tokens
            "cost_usd": round(sum(float((s.get("metrics") or {}).get("cost_usd") or 0.0)
                                  for s in agent), 6),
            "shell_commands": sum(1 for c in commands if c["step_id"] in
                                  {s["step_id"] for s in members})})
        if received is not None:
            previous = received

    rest = [s for s, ts in zip(steps, times) if previous is None or ts is None or ts > previous]
    rest_agent = [s for s in rest if s["source"] == "agent"]
    after = {"steps": [s["step_id"] for s in rest], "calls": len(rest_agent),
             "tokens": sum(int((s.get("metrics") or {}).get("prompt_tokens") or 0)
                           + int((s.get("metrics") or {}).get("completion_tokens") or 0)
                           for s in rest_agent),
             "cost_usd": round(sum(float((s.get("metrics") or {}).get("cost_usd") or 0.0)
                                   for s in rest_agent), 6)}
    views = [_step_view(s, record) for s in steps[:MAX_STEPS]]
    owner = {sid: p["id"] for p in per_sub for sid in p["steps"]}
    for view in views:
        view["submission"] = owner.get(view["step_id"])
    exhausted = [{"limit": e.get("limit"), "budget": e.get("budget"), "used": e.get("used"),
                  "t_s": record.rel_time(parse_time(e.get("timestamp")))}
                 for e in fextra.get("budget_exhausted") or []]
    budget = {k: v for k, v in (record.budget or {}).items() if str(k).startswith("driver_")}
    return {
        "available": True,
        "models": fextra.get("models") or {},
        "calls": int(fextra.get("calls") or 0), "errors": int(fextra.get("errors") or 0),
        "refused": int(fextra.get("refused") or 0),
        "input_tokens": int(fextra.get("input_tokens") or 0),
        "output_tokens": int(final.get("total_completion_tokens") or 0),
        "cached_tokens": int(final.get("total_cached_tokens") or 0),
        "cache_write_tokens": int(fextra.get("cache_write_tokens") or 0),
        "tokens": int(fextra.get("tokens") or 0),
        "cost_usd": float(final.get("total_cost_usd") or 0.0),
        "budget": budget, "budget_exhausted": exhausted,
        "tool_calls_by_kind": fextra.get("tool_calls_by_kind") or {},
        "tool_calls_by_name": fextra.get("tool_calls_by_name") or {},
        "shell_commands": commands[:MAX_COMMANDS],
        "shell_commands_total": len(commands),
        "submissions": per_sub, "after_last_submission": after,
        "steps": views, "steps_total": len(steps),
        "threads": fextra.get("threads") or [],
        "sources": (trajectory.get("extra") or {}).get("sources") or [],
        "warnings": ((trajectory.get("extra") or {}).get("warnings") or [])[:20],
        "trajectory_file": _trajectory_file(record),
        "server": served_driver(record),
        "caps_lowered": [{"seq": e["data"].get("seq"), **e["data"]["cap_lowered"]}
                         for e in record.events_of("driver_call")
                         if isinstance((e.get("data") or {}).get("cap_lowered"), dict)],
    }
