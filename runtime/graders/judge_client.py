"""The judge endpoint: one OpenAI-compatible `/v1/chat/completions` URL, called with retries
(exponential backoff, the server's Retry-After when longer), a disk cache of judgments keyed by
(instruction, both outputs in their order, judge model, prompt and parser versions) and token
accounting."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_json
from a2c.contracts.records import Record
from a2c.fsutil import write_bytes_atomic
from a2c.runtime.graders.judge_config import JudgeConfig, JudgeConfigError
from a2c.runtime.graders.judge_prompts import (
    PARSER_VERSION,
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    USER_TEMPLATE,
)
from a2c.runtime.graders.judge_verdict import _p_b_from_logprobs, parse_verdict


@dataclass
class Judgment:
    p_b: float | None            # P(answer B is better); None when the call failed
    verdict: str | None          # "A" | "B" | None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    error: str | None = None
    raw: str = ""


MISSING = object()   # a cache file without the key: not a judgment of ours


@dataclass
class CachedJudgment(Record):
    """One judgment in the judge's disk cache (JUDGE_CACHE/<key[:2]>/<key>.json)."""

    p_b: Any = MISSING
    verdict: Any = MISSING
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    judge_model: str | None = None
    prompt_version: str | None = None


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after

class JudgeClient:
    """One OpenAI-compatible chat endpoint, with retries, a disk cache and token accounting."""

    def __init__(self, config: JudgeConfig, cache_dir: Path | None, weighted: bool = True,
                 max_retries: int = 5, backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 max_tokens: int = 4, temperature: float = 0.0):
        self.config = config
        self.cache_dir = cache_dir
        self.weighted = weighted
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._lock = threading.Lock()
        self.http_calls = 0
        if cache_dir is not None:
            cache_dir.mkdir(parents=True, exist_ok=True)

    def cache_key(self, instruction: str, output_a: str, output_b: str) -> str:
        return sha256_json({"instruction": instruction, "output_a": output_a,
                            "output_b": output_b, "judge_model": self.config.model,
                            "prompt": PROMPT_VERSION, "parser": PARSER_VERSION,
                            "weighted": self.weighted})

    def judge(self, instruction: str, output_a: str, output_b: str) -> Judgment:
        key = self.cache_key(instruction, output_a, output_b)
        path = self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None
        if path is not None and path.is_file():
            try:
                entry = CachedJudgment.from_dict(json.loads(path.read_text(encoding="utf-8")))
                if entry.p_b is not MISSING and entry.verdict is not MISSING:
                    return Judgment(p_b=entry.p_b, verdict=entry.verdict, cached=True,
                                    prompt_tokens=entry.prompt_tokens,
                                    completion_tokens=entry.completion_tokens, raw=entry.raw)
            except (ValueError, OSError, AttributeError, TypeError):
                pass  # a torn or foreign file: judge again and overwrite it
        j = self._call(instruction, output_a, output_b)
        if path is not None and j.p_b is not None:
            write_bytes_atomic(path, json.dumps(CachedJudgment(
                p_b=j.p_b, verdict=j.verdict, raw=j.raw, prompt_tokens=j.prompt_tokens,
                completion_tokens=j.completion_tokens, judge_model=self.config.model,
                prompt_version=PROMPT_VERSION).to_dict()).encode("utf-8"))
        return j

    def _call(self, instruction: str, output_a: str, output_b: str) -> Judgment:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": USER_TEMPLATE.format(
                             instruction=instruction, output_a=output_a, output_b=output_b)}],
            "temperature": self.temperature, "max_tokens": self.max_tokens,
        }
        if self.weighted:
            body["logprobs"] = True
            body["top_logprobs"] = 5
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        last_error = "no attempt"
        pt = ct = 0
        attempts = 0
        retry_after: float | None = None
        for attempt in range(self.max_retries + 1):
            attempts = attempt + 1
            if attempt:  # exponential backoff, or the server's Retry-After when it is longer
                delay = self.backoff_s * (2 ** (attempt - 1))
                if retry_after is not None:
                    delay = max(delay, retry_after)
                time.sleep(min(self.max_backoff_s, delay))
                retry_after = None
            try:
                with self._lock:
                    self.http_calls += 1
                resp = self._post(data, headers)
                usage = resp.get("usage") or {}
                pt += int(usage.get("prompt_tokens") or 0)
                ct += int(usage.get("completion_tokens") or 0)
                try:
                    choice = resp["choices"][0]
                    content = choice["message"].get("content") or ""
                except (KeyError, IndexError, TypeError, AttributeError):
                    raise _Retryable(f"malformed response: {str(resp)[:200]}") from None
                verdict = parse_verdict(content)
                p_b = _p_b_from_logprobs(choice, verdict) if self.weighted else None
                if verdict is None and p_b is None:
                    raise _Retryable(f"unparseable verdict: {content[:100]!r}")
                if p_b is None:
                    p_b = 1.0 if verdict == "B" else 0.0
                if verdict is None:
                    verdict = "B" if p_b > 0.5 else "A"
                return Judgment(p_b=p_b, verdict=verdict, prompt_tokens=pt,
                                completion_tokens=ct, attempts=attempts, raw=content[:200])
            except _Retryable as exc:
                last_error = str(exc)
                retry_after = exc.retry_after
        return Judgment(p_b=None, verdict=None, prompt_tokens=pt, completion_tokens=ct,
                        attempts=attempts, error=f"after {attempts} attempts: {last_error}")

    def _post(self, data: bytes, headers: dict[str, str]) -> dict:
        req = urllib.request.Request(self.config.endpoint, data=data, headers=headers,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.config.timeout_s) as r:
                payload = r.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace") if exc.fp else ""
            if exc.code in (401, 403):
                raise JudgeConfigError(f"judge endpoint {self.config.endpoint} refused the "
                                       f"credentials (HTTP {exc.code}): {detail}") from None
            if exc.code == 404:
                raise JudgeConfigError(f"judge endpoint {self.config.endpoint} not found "
                                       f"(HTTP 404; model {self.config.model!r}?): {detail}") \
                    from None
            retry_after = None
            ra = exc.headers.get("Retry-After") if exc.headers else None
            if ra:
                try:
                    retry_after = float(ra)
                except ValueError:
                    retry_after = None
            raise _Retryable(f"HTTP {exc.code}: {detail}", retry_after) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            raise _Retryable(f"connection: {exc}") from None
        try:
            return json.loads(payload)
        except ValueError:
            raise _Retryable(f"response is not JSON: {payload[:200]!r}") from None
