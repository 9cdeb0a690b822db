"""Gemini generateContent (`/v1beta/models/MODEL:generateContent`, `:streamGenerateContent`):
the model and streaming named in the path, `contents` of `user`/`model` parts (functionCall,
functionResponse, thought text), `usageMetadata` in each chunk, a stream as SSE with `alt=sse`
or one JSON array without, errors as Google RPC status bodies. Gemini CLI speaks it."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from a2c.wires.base import Reading, Wire, referenced, register
from a2c.wires.content import arguments, history_text, lower_types, text_of
from a2c.wires.openai_chat import media_kind
from a2c.wires.records import Answer, Conversation, Item, Tool, ToolCall, Turn, group, pieces
from a2c.wires.routes import Endpoint, Route
from a2c.wires.sse import event as sse
from a2c.wires.strict import Unreadable, absent, int_field, is_int
from a2c.wires.usage import Usage, count

MAX_CANDIDATES = 8
"""Gemini's largest candidateCount."""
_SNAKE = {"generationConfig": "generation_config", "maxOutputTokens": "max_output_tokens",
          "candidateCount": "candidate_count", "thinkingConfig": "thinking_config",
          "thinkingBudget": "thinking_budget", "responseModalities": "response_modalities",
          "speechConfig": "speech_config", "cachedContent": "cached_content",
          "inlineData": "inline_data", "fileData": "file_data", "mimeType": "mime_type",
          "functionResponse": "function_response", "systemInstruction": "system_instruction"}


def _field(obj: Any, camel: str, where: str = "") -> Any:
    """obj's field by its camelCase name, a snake_case spelling renamed to it (the API reads
    both; the gateway forwards one); a field given in both spellings is refused."""
    if not isinstance(obj, dict):
        return None
    snake = _SNAKE.get(camel)
    if snake in obj:
        if camel in obj:
            raise Unreadable(f"{where}{camel} is given twice ({camel} and {snake}); the "
                             "provider could read either")
        obj[camel] = obj.pop(snake)
    return obj.get(camel)


def _media(parts: Any, reading: Reading) -> None:
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if _field(part, "fileData") is not None:
            raise referenced("a fileData part")
        inline = _field(part, "inlineData")
        if isinstance(inline, dict):
            mime = _field(inline, "mimeType")
            reading.media(media_kind(mime if isinstance(mime, str) else ""),
                          inline.get("data"))
        response = _field(part, "functionResponse")
        if isinstance(response, dict):
            _media(response.get("parts"), reading)

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


PROVIDER_TOOL_KEYS = frozenset({"googleSearch", "google_search", "googleSearchRetrieval",
                                "google_search_retrieval", "urlContext", "url_context",
                                "codeExecution", "code_execution", "googleMaps", "google_maps",
                                "fileSearch", "file_search", "enterpriseWebSearch",
                                "enterprise_web_search", "retrieval"})
"""Keys of a `tools` entry that ask for tools Google runs itself (Search grounding, URL
context, code execution, Maps, file search)."""


def _endpoints() -> tuple[Endpoint, ...]:
    out = []
    for root in ("/v1beta", "/v1"):
        out += [Endpoint(f"{root}/models/{{model}}:generateContent", "generate"),
                Endpoint(f"{root}/models/{{model}}:streamGenerateContent", "generate",
                         stream=True),
                Endpoint(f"{root}/models/{{model}}:countTokens", "count")]
    return (*out, Endpoint("/v1beta/models", "models", "GET"),
            Endpoint("/v1beta/models/{model}", "models", "GET"))


def _answer_chunks(answer: Answer, usage: dict) -> list[dict]:
    """Text in pieces first; the last chunk carries the calls, finishReason and `usage`."""
    text = pieces(answer.text)
    head = {"modelVersion": answer.model, "responseId": answer.id()}
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": p}]},
                               "index": 0}], **head}
              for p in (text if answer.calls else text[:-1])]
    final_parts = ([] if answer.calls else [{"text": (text or ["."])[-1]}]) + \
        [{"functionCall": {"name": c.name, "args": c.arguments}} for c in answer.calls]
    chunks.append({"candidates": [{"content": {"role": "model", "parts": final_parts},
                                   "finishReason": "STOP", "index": 0}],
                   "usageMetadata": usage, **head})
    return chunks


@register
class Gemini(Wire):
    name = "gemini"
    provider = "gemini"
    auth = "x-goog-api-key"
    rank = 3
    endpoints = _endpoints()
    version = "/v1beta"
    query_keys = {"alt": ("sse", "json")}   # streams as SSE with alt=sse
    path_looks = ("/v1beta", "/v1alpha")
    streams_json_array = True

    def looks_like_path(self, path: str) -> bool:
        return super().looks_like_path(path) or ":" in path

    def provider_tools(self, body: dict) -> list[str]:
        tools = body.get("tools")
        return [k for tool in tools if isinstance(tool, dict) for k in tool
                if k in PROVIDER_TOOL_KEYS] if isinstance(tools, list) else []

    def request_streams(self, rt: Route, body: Any) -> bool:
        return rt.path_stream

    def read_request(self, body: dict) -> Reading:
        """Also renames the cost fields' snake_case spellings to camelCase (see `_field`)."""
        g = "generationConfig."
        config = _field(body, "generationConfig")
        if config is not None and not isinstance(config, dict):
            raise Unreadable("generationConfig must be an object")
        for key in ("maxOutputTokens", "candidateCount", "thinkingConfig",
                    "responseModalities", "speechConfig"):
            _field(config, key, g)
        thinking = config.get("thinkingConfig") if config else None
        _field(thinking, "thinkingBudget", g + "thinkingConfig.")
        _field(body, "cachedContent")
        reading = Reading(cap=int_field(config, "maxOutputTokens", g + "maxOutputTokens", 1),
                          candidates=int_field(config, "candidateCount", g + "candidateCount",
                                               1, MAX_CANDIDATES) or 1)
        int_field(thinking, "thinkingBudget", g + "thinkingConfig.thinkingBudget", -1)
        modalities = config.get("responseModalities") if config else None
        if modalities is not None and (not isinstance(modalities, list) or
                                       [str(m).upper() for m in modalities] != ["TEXT"]):
            raise Unreadable("generationConfig.responseModalities other than [\"TEXT\"] are "
                             "refused: image and audio output are billed at rates the price "
                             "table does not hold")
        absent(config, "speechConfig", g + "speechConfig", "audio output is billed at rates "
               "the price table does not hold")
        absent(body, "cachedContent", "cachedContent", "cached content is input the provider "
               "holds, outside the request (and billed by the hour)")
        for content in body.get("contents") or []:
            if isinstance(content, dict):
                _media(content.get("parts"), reading)
        system = _field(body, "systemInstruction")
        if isinstance(system, dict):
            _media(system.get("parts"), reading)
        return reading

    def count_request(self, body: dict, path: str) -> tuple[str, dict] | None:
        head, _, _ = path.partition("?")
        model = head.rsplit("/", 1)[-1].split(":", 1)[0]
        target = head.rsplit(":", 1)[0] + ":countTokens"
        return target, {"generateContentRequest": {"model": f"models/{model}", **body}}

    def count_of(self, answer: Any) -> int | None:
        value = answer.get("totalTokens") if isinstance(answer, dict) else None
        return value if is_int(value) and value >= 0 else None

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
        return Conversation(self.name, model, tools, prompt + "\n" + first, results,
                            stream=stream, json_reply=json_reply)

    def question(self, model: str, system: str, user: str, max_tokens: int
                 ) -> tuple[str, dict[str, Any]]:
        return f"/v1beta/models/{model}:generateContent", {
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": user}]}],
            "generationConfig": {"maxOutputTokens": max_tokens}}

    def answer(self, answer: Answer) -> dict:
        parts: list[dict] = [{"text": answer.text}] if answer.text else []
        parts += [{"functionCall": {"name": c.name, "args": c.arguments}} for c in answer.calls]
        return {"candidates": [{"content": {"role": "model", "parts": parts or [{"text": "."}]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": self.usage_fields(answer.usage), "modelVersion": answer.model,
                "responseId": answer.id()}

    def answer_stream(self, answer: Answer, conv: Conversation, query: str
                      ) -> tuple[list[bytes], str]:
        """SSE with `alt=sse`; else one JSON array, sent element by element."""
        chunks = _answer_chunks(answer, self.usage_fields(answer.usage))
        if urllib.parse.parse_qs(query).get("alt", [""])[0] == "sse":
            return [sse(None, c) for c in chunks], "text/event-stream"
        body = [b"["]
        for i, c in enumerate(chunks):
            body.append((("," if i else "") + json.dumps(c)).encode())
        body.append(b"]")
        return body, "application/json"

    def count_answer(self, tokens: int) -> dict:
        return {"totalTokens": tokens}
