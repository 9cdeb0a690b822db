"""Gemini generateContent (`/v1beta/models/MODEL:generateContent`, `:streamGenerateContent`):
the model and streaming named in the path, `contents` of `user`/`model` parts (functionCall,
functionResponse, thought text), `usageMetadata` in each chunk, a stream as SSE with `alt=sse`
or one JSON array without, errors as Google RPC status bodies. Gemini CLI speaks it."""

from __future__ import annotations

from typing import Any

from a2c.wires.base import Wire, positive_int, register
from a2c.wires.content import arguments, history_text, lower_types, text_of
from a2c.wires.records import Conversation, Item, Tool, ToolCall, Turn, group
from a2c.wires.routes import Route
from a2c.wires.usage import Usage, count

_STATUS = {"auth": "UNAUTHENTICATED", "model": "INVALID_ARGUMENT",
           "budget": "RESOURCE_EXHAUSTED", "timeout": "DEADLINE_EXCEEDED",
           "upstream": "UNAVAILABLE", "not_served": "NOT_FOUND", "bad_request": "INVALID_ARGUMENT"}


def _parts(parts: list[dict[str, Any]]) -> Turn:
    turn = Turn()
    for part in parts:
        if "functionCall" in part:
            fc = part["functionCall"] or {}
            turn.tool_calls.append(ToolCall(fc.get("id") or "", fc.get("name") or "",
                                            arguments(fc.get("args")), synth=not fc.get("id")))
        elif "text" in part:
            if part.get("thought"):
                turn.reasoning += part.get("text") or ""
            else:
                turn.text += part.get("text") or ""
    return turn


def _tool_result(part: dict[str, Any]) -> Item:
    fr = part["functionResponse"] or {}
    response = fr.get("response")
    content = text_of(response.get("output", response.get("content", response))
                      if isinstance(response, dict) else response)
    return Item.tool_result(fr.get("id"), fr.get("name"), content,
                            isinstance(response, dict) and "error" in response)


@register
class Gemini(Wire):
    name = "gemini"
    provider = "gemini"
    auth = "x-goog-api-key"

    def request_streams(self, rt: Route, body: Any) -> bool:
        return rt.path_stream

    def output_cap(self, body: dict) -> tuple[int | None, int]:
        config = body.get("generationConfig")
        config = config if isinstance(config, dict) else {}
        return positive_int(config.get("maxOutputTokens")), \
            positive_int(config.get("candidateCount")) or 1

    def set_output_cap(self, body: dict, cap: int) -> None:
        config = body.get("generationConfig")
        if not isinstance(config, dict):
            config = body["generationConfig"] = {}
        config["maxOutputTokens"] = cap

    def read_usage(self, obj: Any, u: Usage) -> None:
        if not isinstance(obj, dict):
            return
        u.model = obj.get("modelVersion") or u.model
        if isinstance(obj.get("usageMetadata"), dict):
            meta = obj["usageMetadata"]
            prompt = count(meta.get("promptTokenCount")) + \
                count(meta.get("toolUsePromptTokenCount"))
            cached = count(meta.get("cachedContentTokenCount"))
            u.input_tokens, u.cache_read_tokens = max(prompt - cached, 0), cached
            u.output_tokens = count(meta.get("candidatesTokenCount")) + \
                count(meta.get("thoughtsTokenCount"))
            u.seen = True

    def usage_fields(self, u: Usage) -> dict:
        prompt = u.input_tokens + u.cache_read_tokens
        return {"promptTokenCount": prompt, "candidatesTokenCount": u.output_tokens,
                "totalTokenCount": prompt + u.output_tokens,
                "cachedContentTokenCount": u.cache_read_tokens}

    def error(self, status: int, kind: str, message: str) -> dict:
        err: dict = {"code": status, "message": message, "status": _STATUS[kind]}
        if kind == "budget":
            # A per-day quota violation: Gemini CLI classifies it as terminal (no retry).
            err["details"] = [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                 "violations": [{"quotaMetric": "a2c/driver_budget",
                                 "quotaId": "A2CDriverBudgetPerDay",
                                 "quotaDimensions": {}, "description": message}]},
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                 "reason": "QUOTA_EXHAUSTED", "domain": "a2c.driver-gateway"}]
        return {"error": err}

    def request_items(self, body: dict[str, Any]) -> list[Item]:
        items: list[Item] = []
        system = body.get("systemInstruction") or body.get("system_instruction")
        if system:
            items.append(Item("system", text_of(system.get("parts") if isinstance(system, dict)
                                                else system)))
        for content in body.get("contents") or []:
            if not isinstance(content, dict):
                continue
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            if content.get("role") == "model":
                items.append(Item.assistant(_parts(parts)))
                continue
            texts = []
            for part in parts:
                if "functionResponse" in part:
                    items.append(_tool_result(part))
                elif "text" in part:
                    texts.append(part.get("text") or "")
            if any(t.strip() for t in texts):
                items.append(Item("user", "\n".join(texts)))
        return items

    def response(self, body: dict[str, Any]) -> Turn:
        return self.response_stream([(None, body)])

    def response_stream(self, events: list[tuple[str | None, Any]]) -> Turn:
        turn = Turn()
        for _, data in events:
            if not isinstance(data, dict):
                continue
            if isinstance(data.get("response"), dict):   # Code Assist envelope
                data = data["response"]
            turn.model = data.get("modelVersion") or turn.model
            self.read_usage(data, turn.usage)
            for candidate in (data.get("candidates") or [])[:1]:
                parts = [p for p in ((candidate or {}).get("content") or {}).get("parts") or []
                         if isinstance(p, dict)]
                piece = _parts(parts)
                turn.text += piece.text
                turn.reasoning += piece.reasoning
                turn.tool_calls += piece.tool_calls
                turn.stop = candidate.get("finishReason") or turn.stop
        return turn

    def conversation(self, body: dict, model: str = "", stream: bool = False) -> Conversation:
        tools = []
        for declared in body.get("tools") or []:
            for fn in (declared or {}).get("functionDeclarations") or (declared or {}).get(
                    "function_declarations") or []:
                if isinstance(fn, dict) and fn.get("name"):
                    params = fn.get("parametersJsonSchema") or fn.get("parameters") or {}
                    tools.append(Tool(fn["name"], lower_types(params), fn.get("description", "")))
        entries = [(c.get("role") == "model", history_text(c.get("parts")))
                   for c in body.get("contents") or [] if isinstance(c, dict)]
        results, first = group(entries)
        system = body.get("systemInstruction") or body.get("system_instruction") or {}
        config = body.get("generationConfig") or {}
        json_reply = str(config.get("responseMimeType", "")).startswith("application/json")
        prompt = history_text(system.get("parts") if isinstance(system, dict) else system)
        return Conversation("gemini", model, tools, prompt + "\n" + first, results,
                            stream=stream, json_reply=json_reply)
