"""Pairwise judge (AlpacaEval 2.0): the submitted model's outputs against reference outputs.

A judge model behind any OpenAI-compatible `/v1/chat/completions` endpoint compares, for every
instruction, the model's output with the reference output, twice: once with the reference shown
first and once with the model's output first, so that a judge's preference for a position cancels.
The item's preference is the mean of the two (1 = the model wins both, 0.5 = a tie or a split,
0 = the reference wins both). When the endpoint returns log-probabilities (`weighted: true`, as
AlpacaEval 2.0's weighted judge), a judgment is the probability of the verdict, not a hard 0/1.

The endpoint, key and judge model come from the environment (`A2C_JUDGE_BASE_URL`,
`A2C_JUDGE_API_KEY`, `A2C_JUDGE_MODEL`, optional `A2C_JUDGE_PRICE_PROMPT_PER_1K`,
`A2C_JUDGE_PRICE_COMPLETION_PER_1K`) or a JSON/YAML file named by `A2C_JUDGE_CONFIG` (same keys,
lower-case, without the prefix); the environment wins. Never from the spec.

Judgments are cached on disk keyed by (instruction, both outputs in their order, judge model,
prompt version). Calls are retried with exponential backoff; a judgment that still fails is counted
and reported and its item is left out of the win rate (never scored as a loss); over
`failure_threshold` of failed items, the result is marked unreliable (`valid: false`).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_json
from a2c.contracts.grade_result import GradeResult
from a2c.runtime.graders.base import Grader, GraderError, as_samples
from a2c.runtime.graders.lc import length_controlled_winrate

PROMPT_VERSION = "a2c-pairwise-1"
# How a reply becomes a judgment (verdict patterns, which token's logprobs); part of the cache key.
PARSER_VERSION = 2
SYSTEM_PROMPT = (
    "You are a careful and impartial judge of the quality of answers given by AI assistants. "
    "You compare two answers to the same instruction and decide which one a thoughtful human "
    "would prefer: the more helpful, correct, honest and relevant one. Do not let the order of the "
    "answers or their length influence you.")
USER_TEMPLATE = (
    "## Instruction\n\n{instruction}\n\n"
    "## Answer A\n\n{output_a}\n\n"
    "## Answer B\n\n{output_b}\n\n"
    "## Task\n\nWhich answer is better? Reply with exactly one letter: A or B.")

ENV_PREFIX = "A2C_JUDGE_"
CONFIG_KEYS = ("base_url", "api_key", "model", "price_prompt_per_1k",
               "price_completion_per_1k", "timeout_s", "backoff_s", "concurrency")
FORBIDDEN_PARAMS = ("base_url", "api_key", "url", "endpoint", "key")
JUDGE_TEMPLATES = ("alpaca_eval",)


class JudgeConfigError(GraderError):
    """The judge is not configured (or refuses our credentials)."""


@dataclass
class JudgeConfig:
    base_url: str
    model: str
    api_key: str = ""
    price_prompt_per_1k: float = 0.0
    price_completion_per_1k: float = 0.0
    timeout_s: float = 60.0
    backoff_s: float | None = None       # first retry delay (doubles each retry)
    concurrency: int | None = None       # judge calls in flight
    source: str = "env"

    @property
    def endpoint(self) -> str:
        url = self.base_url.rstrip("/")
        if url.endswith("/chat/completions"):
            return url
        if url.endswith("/v1"):
            return url + "/chat/completions"
        return url + "/v1/chat/completions"

    def public(self) -> dict[str, Any]:
        """What may be recorded with a result (never the key)."""
        return {"base_url": self.base_url, "model": self.model, "source": self.source,
                "price_prompt_per_1k": self.price_prompt_per_1k,
                "price_completion_per_1k": self.price_completion_per_1k}


def load_judge_config(env: dict[str, str] | None = None,
                      default_model: str | None = None) -> JudgeConfig:
    """The judge endpoint: A2C_JUDGE_* variables over the A2C_JUDGE_CONFIG file; the model falls
    back to `default_model` (the spec's `judge_model`) when neither names one."""
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}
    sources = []
    path = env.get(ENV_PREFIX + "CONFIG")
    if path:
        p = Path(path).expanduser()
        if not p.is_file():
            raise JudgeConfigError(f"A2C_JUDGE_CONFIG={path}: no such file")
        text = p.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            try:
                import yaml

                data = yaml.safe_load(text)
            except Exception as exc:  # noqa: BLE001 - any parse failure is the user's file
                raise JudgeConfigError(f"A2C_JUDGE_CONFIG={path}: not JSON or YAML: {exc}") \
                    from None
        if not isinstance(data, dict):
            raise JudgeConfigError(f"A2C_JUDGE_CONFIG={path}: expected a mapping of "
                                   f"{', '.join(CONFIG_KEYS)}")
        if "api_key_env" in data and not data.get("api_key"):
            data["api_key"] = env.get(str(data["api_key_env"]), "")
        values.update({k: data[k] for k in CONFIG_KEYS if data.get(k) not in (None, "")})
        sources.append(f"file:{p}")
    for k in CONFIG_KEYS:
        v = env.get(ENV_PREFIX + k.upper())
        if v not in (None, ""):
            values[k] = v
            if "env" not in sources:
                sources.append("env")
    if not values.get("model") and default_model:
        values["model"] = default_model
    missing = [k for k in ("base_url", "model") if not values.get(k)]
    if missing:
        raise JudgeConfigError(
            "pairwise_judge: no judge configured (missing "
            + ", ".join(ENV_PREFIX + m.upper() for m in missing)
            + "). Set A2C_JUDGE_BASE_URL (an OpenAI-compatible endpoint, e.g. "
              "http://127.0.0.1:8000/v1), A2C_JUDGE_MODEL and, if the endpoint needs one, "
              "A2C_JUDGE_API_KEY; or point A2C_JUDGE_CONFIG at a JSON/YAML file with base_url, "
              "model, api_key. See docs/graders.md.")
    try:
        return JudgeConfig(base_url=str(values["base_url"]), model=str(values["model"]),
                           api_key=str(values.get("api_key", "")),
                           price_prompt_per_1k=float(values.get("price_prompt_per_1k", 0.0)),
                           price_completion_per_1k=float(values.get("price_completion_per_1k",
                                                                    0.0)),
                           timeout_s=float(values.get("timeout_s", 60.0)),
                           backoff_s=(float(values["backoff_s"]) if values.get("backoff_s")
                                      not in (None, "") else None),
                           concurrency=(int(values["concurrency"]) if values.get("concurrency")
                                        not in (None, "") else None),
                           source="+".join(sources))
    except ValueError as exc:
        raise JudgeConfigError(f"pairwise_judge: bad judge configuration value: {exc}") from None


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


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


# A verdict letter: upper case, or either case in brackets ("Output (a)"); a lower-case "a" on its
# own is an article, not a verdict.
_LETTER = r"(?:[(\[]\s*([AaBb])\s*[)\]]|([AB]))(?![\w'-])"
_NAMED = r"(?i:answer|output|response|model|assistant)"
_VERDICT_PATTERNS = [
    # at the start: "Answer A", "Output (a)", "Response: B", "The answer A is", "Better answer: B"
    re.compile(r"^(?i:the\s+)?(?i:(?:better|best|preferred|winning)\s+)?" + _NAMED
               + r"\s*(?i:is\s*)?[:=#-]?\s*" + _LETTER),
    # a bare letter first: "A", "(B)", "**B**", "A is better.", "B."
    re.compile(r"^" + _LETTER),
    # anywhere: "Answer B is better", "Output (a) is preferred"
    re.compile(_NAMED + r"\s*" + _LETTER + r"\s+(?i:is\s+(?:the\s+)?(?:better|preferred|best))"),
    # anywhere: "The better answer is B", "Preferred output: (a)", "Verdict: A", "Winner: B"
    re.compile(r"(?i:(?:better|best|preferred|winning)\s+" + _NAMED + r"|verdict|winner|choice)"
               r"\s*(?i:is|would be|:)\s*(?:" + _NAMED + r"\s*)?" + _LETTER),
    # anywhere: "I prefer B", "I choose Answer A"
    re.compile(r"\bI\s+(?i:prefer|choose|pick|select)\s+(?:" + _NAMED + r"\s*)?" + _LETTER),
]
_JSON_KEYS = ("winner", "verdict", "better", "preferred", "preference", "choice", "answer",
              "best", "output", "result")
# AlpacaEval's ranking templates name the outputs model_1/model_2 (or m/M); the first is A.
_MODEL_NAMES = {"model_1": "A", "model_2": "B", "m": "A", "M": "B", "1": "A", "2": "B"}


def _verdict_from_json(content: str) -> str | None:
    """A verdict from a JSON reply (optionally in a ```json fence): {"winner": "B"},
    {"verdict": "Output (a)"}, or AlpacaEval's ranking list
    [{"model": "model_1", "rank": 2}, {"model": "model_2", "rank": 1}]."""
    m = re.search(r"[\[{].*[\]}]", content, re.DOTALL)
    if not m:
        return None
    try:
        data = json.loads(m.group(0))
    except ValueError:
        try:  # AlpacaEval's templates show Python-style single quotes
            import ast

            data = ast.literal_eval(m.group(0))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if isinstance(data, dict):
        for k, v in data.items():
            if str(k).lower() in _JSON_KEYS and isinstance(v, (str, int)):
                v = str(v).strip()
                if v in _MODEL_NAMES:
                    return _MODEL_NAMES[v]
                got = parse_verdict(v, _json=False)
                if got:
                    return got
        return None
    if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        try:
            best = min(data, key=lambda d: float(d["rank"]))
        except (KeyError, TypeError, ValueError):
            return None
        name = str(best.get("model", best.get("output", ""))).strip()
        return _MODEL_NAMES.get(name) or parse_verdict(name, _json=False)
    return None


def parse_verdict(content: str, _json: bool = True) -> str | None:
    """'A' or 'B' from the judge's reply, or None when the reply names neither.

    Accepts a bare letter in either case ("A", "b", "(B)", "**B**", "A is better."), a named
    answer ("Answer A", "Output (a)", "Response: B", "The answer B is better", "The better answer
    is A", "Verdict: B"), AlpacaEval's "m" / "M" replies (m = the first output = A), and JSON
    ({"winner": "B"}, a ranking list [{"model": "model_1", "rank": 1}, ...]). A reply that names
    both letters in different verdict phrases, or none, is None (a failed judgment, never a loss).
    """
    s = (content or "").strip()
    bare = s.strip("()[]*\"'`.:!, \n")
    if bare.upper() in ("A", "B"):
        return bare.upper()
    if bare in ("m", "M"):
        return _MODEL_NAMES[bare]
    if _json and s[:1] in "[{`":
        got = _verdict_from_json(s)
        if got:
            return got
    text = s.lstrip("*\"'` \n#>")
    for i, pat in enumerate(_VERDICT_PATTERNS):
        m = pat.search(text) if i >= 2 else pat.match(text)
        if m:
            return next(g for g in m.groups() if g).upper()
    if _json and ("{" in s or "[" in s):
        return _verdict_from_json(s)
    return None


def _verdict_letter(token: str) -> str | None:
    t = str(token).strip().strip("()[]*\"'`").upper()
    return t if t in ("A", "B") else None


def _p_b_from_logprobs(choice: dict, verdict: str | None = None) -> float | None:
    """P(B) / (P(A) + P(B)) at the token where the judge wrote its verdict letter: the first
    generated token (AlpacaEval's weighted judge), or, when the reply starts with words ("The
    answer A ..."), the first token that is the parsed verdict. None when that token's
    alternatives name neither letter."""
    try:
        content = choice["logprobs"]["content"]
    except (KeyError, TypeError):
        return None
    if not content:
        return None
    pos = None
    for i, entry in enumerate(content[:64]):
        letter = _verdict_letter((entry or {}).get("token", ""))
        if letter is not None and (i == 0 or letter == verdict):
            pos = i
            break
    if pos is None:
        return None
    try:
        tops = content[pos].get("top_logprobs") or []
    except AttributeError:
        return None
    pa = pb = 0.0
    for t in tops:
        letter = _verdict_letter(t.get("token", ""))
        lp = t.get("logprob")
        if lp is None or letter is None:
            continue
        if letter == "A":
            pa += math.exp(lp)
        else:
            pb += math.exp(lp)
    if pa + pb <= 0:
        return None
    return pb / (pa + pb)


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
                data = json.loads(path.read_text(encoding="utf-8"))
                return Judgment(p_b=data["p_b"], verdict=data["verdict"], cached=True,
                                prompt_tokens=data.get("prompt_tokens", 0),
                                completion_tokens=data.get("completion_tokens", 0),
                                raw=data.get("raw", ""))
            except (ValueError, KeyError, OSError):
                pass  # a torn or foreign file: judge again and overwrite it
        j = self._call(instruction, output_a, output_b)
        if path is not None and j.p_b is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps({"p_b": j.p_b, "verdict": j.verdict, "raw": j.raw,
                                       "prompt_tokens": j.prompt_tokens,
                                       "completion_tokens": j.completion_tokens,
                                       "judge_model": self.config.model,
                                       "prompt_version": PROMPT_VERSION}), encoding="utf-8")
            os.replace(tmp, path)
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


class PairwiseJudgeGrader(Grader):
    kind = "pairwise_judge"
    version = "1.1"   # 1.1: wider verdict parsing, logprobs at the verdict token

    def __init__(self, grader_cfg: dict[str, Any], env: dict[str, str] | None = None):
        super().__init__(grader_cfg)
        p = self.params
        bad = [k for k in FORBIDDEN_PARAMS if k in p]
        if bad:
            raise GraderError(f"pairwise_judge: {', '.join(bad)} must not be in the spec; the "
                              f"judge endpoint, key and model come from A2C_JUDGE_* environment "
                              f"variables or A2C_JUDGE_CONFIG")
        self.env = env
        self.spec_judge_model = p.get("judge_model")
        self.weighted = bool(p.get("weighted", True))
        self.failure_threshold = float(p.get("max_failure_rate", p.get("failure_threshold", 0.05)))
        self.swap_positions = bool(p.get("swap_positions", True))
        self.length_controlled = bool(p.get("length_controlled", True))
        self.template = p.get("judge_template", "alpaca_eval")
        if self.template not in JUDGE_TEMPLATES:
            raise GraderError(f"pairwise_judge: unknown judge_template {self.template!r} "
                              f"(known: {', '.join(JUDGE_TEMPLATES)})")
        self.max_output_tokens = int(p.get("max_output_tokens", 4))
        self.concurrency = p.get("concurrency")
        self.max_retries = int(p.get("max_retries", 5))
        self.backoff_s = p.get("backoff_s")
        self.max_backoff_s = float(p.get("max_backoff_s", 30.0))
        self.lc_l2 = float(p.get("lc_l2", 1.0))
        self.use_cache = bool(p.get("cache", True))
        self.reference_field = p.get("reference_field", "answer")
        self.instruction_field = p.get("instruction_field", "prompt")
        self._client: JudgeClient | None = None

    def client(self) -> JudgeClient:
        if self._client is None:
            config = load_judge_config(self.env, default_model=self.spec_judge_model)
            cache = None
            if self.use_cache:
                env = os.environ if self.env is None else self.env
                root = self.params.get("cache_dir") or env.get("A2C_JUDGE_CACHE")
                if root:
                    cache = Path(root)
                else:
                    from a2c.paths import cache_dir

                    cache = cache_dir() / "judge"
            if self.backoff_s is None:
                self.backoff_s = config.backoff_s if config.backoff_s is not None else 1.0
            if self.concurrency is None:
                self.concurrency = config.concurrency or 4
            self._client = JudgeClient(config, cache, weighted=self.weighted,
                                       max_retries=self.max_retries,
                                       backoff_s=float(self.backoff_s),
                                       max_backoff_s=self.max_backoff_s,
                                       max_tokens=self.max_output_tokens)
        return self._client

    def orders(self, record: dict) -> tuple[str, ...]:
        """Both orders; with swap_positions false, one order chosen by the item's id hash (so
        each position is used about half of the time, reproducibly)."""
        if self.swap_positions:
            return ("reference_first", "model_first")
        h = int(sha256_json({"id": str(record.get("id"))})[:8], 16)
        return ("reference_first",) if h % 2 == 0 else ("model_first",)

    def _instruction(self, r: dict) -> str:
        v = r.get(self.instruction_field, r.get("instruction", r.get("prompt")))
        if isinstance(v, list):  # chat messages: the last user turn
            v = next((m.get("content", "") for m in reversed(v) if m.get("role") == "user"), "")
        return str(v)

    def _reference(self, r: dict) -> str:
        if self.reference_field in r:
            return str(r[self.reference_field])
        if "output" in r:
            return str(r["output"])
        raise GraderError(f"pairwise_judge: record {r.get('id')!r} has no reference output "
                          f"(field {self.reference_field!r})")

    def score(self, records: list[dict], prompts: list[Any], outputs: list[str | None],
              backend: str, started: float, extra: dict | None = None) -> GradeResult:
        refs = [self._reference(r) for r in records]
        instructions = [self._instruction(r) for r in records]
        client = self.client()
        jobs: dict[tuple[int, str], Any] = {}
        with ThreadPoolExecutor(max_workers=max(1, int(self.concurrency))) as pool:
            for i, (ins, ref, out) in enumerate(zip(instructions, refs, outputs)):
                if out is None or out == ref:
                    continue
                # reference first (the model is B), then the model first (the model is A)
                for order in self.orders(records[i]):
                    a, b = (ref, out) if order == "reference_first" else (out, ref)
                    jobs[(i, order)] = pool.submit(client.judge, ins, a, b)
            results = {k: f.result() for k, f in jobs.items()}
        items = []
        prefs, lm, lb, diffs = [], [], [], []
        tokens = {"prompt": 0, "completion": 0}
        n_cached = n_calls = n_failed_calls = 0
        for i, (r, p, _ins, ref, out) in enumerate(zip(records, prompts, instructions, refs,
                                                      outputs)):
            item = {"id": r["id"], "prompt": p, "output": out, "extracted": None, "gold": ref,
                    "error": None, "len_output": len(out) if out is not None else 0,
                    "len_reference": len(ref), "judgments": []}
            if out is None:
                item.update(preference=0.0, correct=False, score=0.0,
                            error="missing prediction")
            elif out == ref:
                item.update(preference=0.5, correct=False, score=0.5, identical=True)
            else:
                failed = []
                p_model = []
                for order in self.orders(r):
                    j = results[(i, order)]
                    n_calls += 1
                    n_cached += int(j.cached)
                    if not j.cached:
                        tokens["prompt"] += j.prompt_tokens
                        tokens["completion"] += j.completion_tokens
                    pm = None
                    if j.p_b is not None:
                        pm = j.p_b if order == "reference_first" else 1.0 - j.p_b
                        p_model.append(pm)
                    else:
                        n_failed_calls += 1
                        failed.append(f"{order}: {j.error}")
                    item["judgments"].append({"order": order, "verdict": j.verdict,
                                              "p_model": pm, "cached": j.cached,
                                              "attempts": j.attempts, "error": j.error,
                                              "raw": j.raw})
                if failed:
                    item.update(preference=None, correct=False, score=0.0, excluded=True,
                                error="judge failed: " + "; ".join(failed))
                else:
                    pref = sum(p_model) / len(p_model)
                    item.update(preference=pref, correct=pref > 0.5, score=pref)
            if not item.get("excluded"):
                prefs.append(item["preference"])
                lm.append(item["len_output"])
                lb.append(item["len_reference"])
                diffs.append(r.get("instruction_difficulty"))
            items.append(item)
        n_failed_items = sum(1 for it in items if it.get("excluded"))
        use_diff = bool(diffs) and all(d is not None for d in diffs)
        lc = length_controlled_winrate(prefs, lm, lb, diffs if use_diff else None, l2=self.lc_l2)
        if not self.length_controlled:
            lc.update(lc_win_rate=None, coefficients={})
        n = len(items)
        fail_rate = n_failed_calls / n_calls if n_calls else 0.0
        reliable = fail_rate <= self.failure_threshold
        cfg = client.config
        cost = (tokens["prompt"] / 1000.0 * cfg.price_prompt_per_1k
                + tokens["completion"] / 1000.0 * cfg.price_completion_per_1k)
        metrics = {
            "win_rate": lc["win_rate"], "lc_win_rate": lc["lc_win_rate"],
            "lc_coefficients": lc["coefficients"], "lc_l2": self.lc_l2,
            "lc_instruction_difficulty": use_diff,
            "n_wins": sum(1 for it in items if it.get("preference") is not None
                          and it["preference"] > 0.5),
            "n_losses": sum(1 for it in items if it.get("preference") is not None
                            and it["preference"] < 0.5),
            "n_ties": sum(1 for it in items if it.get("preference") == 0.5),
            "n_identical": sum(1 for it in items if it.get("identical")),
            "n_missing": sum(1 for it in items if it["error"] == "missing prediction"),
            "n_scored": len(prefs),
            "judge_failures": n_failed_calls, "judge_failed_items": n_failed_items,
            "judge_failure_rate": fail_rate, "max_failure_rate": self.failure_threshold,
            "swap_positions": self.swap_positions, "judge_template": self.template,
            "spec_judge_model": self.spec_judge_model,
            "reliable": reliable,
            "judge_calls": n_calls, "judge_cached": n_cached,
            "judge_http_requests": client.http_calls,
            "tokens": {**tokens, "total": tokens["prompt"] + tokens["completion"]},
            "cost": round(cost, 6), "judge": cfg.public(), "weighted": self.weighted,
            "prompt_version": PROMPT_VERSION,
            "avg_len_output": (sum(it["len_output"] for it in items) / n) if n else 0.0,
            "avg_len_reference": (sum(it["len_reference"] for it in items) / n) if n else 0.0,
            **(extra or {}),
        }
        error = None
        if not reliable:
            error = (f"unreliable: {n_failed_calls}/{n_calls} judgments failed after retries "
                     f"({100 * fail_rate:.1f}% > {100 * self.failure_threshold:.1f}%); "
                     f"{n_failed_items} items left out of the win rate")
        return self.finish(items, metrics, backend, started, score=lc["win_rate"],
                           valid=reliable, error=error)

    def grade_model(self, model_path: str | Path, records: list[dict],
                    backend_kind: str = "auto") -> GradeResult:
        started = time.monotonic()
        self.client()  # fail fast on a missing judge before spending time on generation
        prompts = [self.build_prompt(r) for r in records]
        outputs, backend = self.generate(model_path, prompts, backend_kind, n=1)
        return self.score(records, prompts, [o[0] for o in outputs], backend, started,
                          {"inference": dict(self.inference)})

    def grade_predictions(self, predictions: dict[str, Any], records: list[dict]) -> GradeResult:
        started = time.monotonic()
        prompts = [self.build_prompt(r) for r in records]
        outs = []
        for r in records:
            s = as_samples(predictions.get(str(r["id"])))
            outs.append(s[0] if s else None)
        return self.score(records, prompts, outs, "predictions", started)
