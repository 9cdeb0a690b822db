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

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_json
from a2c.contracts.grade_result import GradeResult
from a2c.contracts.spec import GraderSpec
from a2c.runtime.graders.base import Grader, GraderError, as_samples
from a2c.runtime.graders.judge_client import JudgeClient, Judgment
from a2c.runtime.graders.judge_config import JudgeConfig, JudgeConfigError, load_judge_config
from a2c.runtime.graders.judge_prompts import JUDGE_TEMPLATES, PROMPT_VERSION
from a2c.runtime.graders.judge_verdict import parse_verdict
from a2c.runtime.graders.lc import length_controlled_winrate
from a2c.settings import get as setting

__all__ = ["JudgeClient", "JudgeConfig", "JudgeConfigError", "Judgment", "PairwiseJudgeGrader",
           "load_judge_config", "parse_verdict"]

# The judge's endpoint and key never come from the spec.
FORBIDDEN_PARAMS = ("base_url", "api_key", "url", "endpoint", "key")


@dataclass(frozen=True)
class JudgeParams:
    """The pairwise judge's parameters (the task's `grader.params`), each with its default once;
    the compiler writes the ones it resolves (compiler/resolve.py DEFAULT_PARAMS)."""

    judge_model: str | None = None
    weighted: bool = True
    max_failure_rate: float = 0.05
    swap_positions: bool = True
    length_controlled: bool = True
    judge_template: str = "alpaca_eval"
    max_output_tokens: int = 4
    concurrency: int | None = None       # unset: the judge config's, else 4
    max_retries: int = 5
    backoff_s: float | None = None       # unset: the judge config's, else 1 s
    max_backoff_s: float = 30.0
    lc_l2: float = 1.0
    cache: bool = True
    cache_dir: str | None = None         # unset: $A2C_JUDGE_CACHE, else the a2c cache
    reference_field: str = "answer"
    instruction_field: str = "prompt"

    @classmethod
    def of(cls, params: dict[str, Any]) -> JudgeParams:
        """The spec's params, typed; `failure_threshold` is the older name of
        `max_failure_rate`."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in params.items() if k in known}
        if "max_failure_rate" not in values and "failure_threshold" in params:
            values["max_failure_rate"] = params["failure_threshold"]
        return cls(**values)


@dataclass
class _Tally:
    """The judge calls a grading made: how many, from the cache, failed, and their tokens."""

    calls: int = 0
    cached: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, judgment: Judgment) -> None:
        self.calls += 1
        self.cached += int(judgment.cached)
        if not judgment.cached:
            self.prompt_tokens += judgment.prompt_tokens
            self.completion_tokens += judgment.completion_tokens
        if judgment.p_b is None:
            self.failed_calls += 1

    @property
    def failure_rate(self) -> float:
        return self.failed_calls / self.calls if self.calls else 0.0


@dataclass
class _JudgedItem:
    """One item's outcome beside the item written into the result (`item`)."""

    item: dict[str, Any]
    len_output: int
    len_reference: int
    difficulty: Any
    preference: float | None = None
    excluded: bool = False
    identical: bool = False
    missing: bool = False


class PairwiseJudgeGrader(Grader):
    kind = "pairwise_judge"
    version = "1.1"   # 1.1: wider verdict parsing, logprobs at the verdict token

    def __init__(self, grader_cfg: GraderSpec | dict[str, Any],
                 env: dict[str, str] | None = None):
        super().__init__(grader_cfg)
        p = self.params
        bad = [k for k in FORBIDDEN_PARAMS if k in p]
        if bad:
            raise GraderError(f"pairwise_judge: {', '.join(bad)} must not be in the spec; the "
                              f"judge endpoint, key and model come from A2C_JUDGE_* environment "
                              f"variables or A2C_JUDGE_CONFIG")
        self.env = env
        jp = JudgeParams.of(p)
        self.spec_judge_model = jp.judge_model
        self.weighted = bool(jp.weighted)
        self.failure_threshold = float(jp.max_failure_rate)
        self.swap_positions = bool(jp.swap_positions)
        self.length_controlled = bool(jp.length_controlled)
        self.template = jp.judge_template
        if self.template not in JUDGE_TEMPLATES:
            raise GraderError(f"pairwise_judge: unknown judge_template {self.template!r} "
                              f"(known: {', '.join(JUDGE_TEMPLATES)})")
        self.max_output_tokens = int(jp.max_output_tokens)
        self.concurrency = jp.concurrency
        self.max_retries = int(jp.max_retries)
        self.backoff_s = jp.backoff_s
        self.max_backoff_s = float(jp.max_backoff_s)
        self.lc_l2 = float(jp.lc_l2)
        self.use_cache = bool(jp.cache)
        self.cache_dir = jp.cache_dir
        self.reference_field = jp.reference_field
        self.instruction_field = jp.instruction_field
        self._client: JudgeClient | None = None

    def client(self) -> JudgeClient:
        if self._client is None:
            config = load_judge_config(self.env, default_model=self.spec_judge_model)
            cache = None
            if self.use_cache:
                env = os.environ if self.env is None else self.env
                root = self.cache_dir or setting("A2C_JUDGE_CACHE", env)
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
        results = self._judge_all(client, records, instructions, refs, outputs)
        tally = _Tally()
        scored = [self._judged_item(i, r, p, ref, out, results, tally)
                  for i, (r, p, ref, out) in enumerate(zip(records, prompts, refs, outputs))]
        kept = [s for s in scored if not s.excluded]
        diffs = [s.difficulty for s in kept]
        use_diff = bool(diffs) and all(d is not None for d in diffs)
        lc = length_controlled_winrate([s.preference for s in kept],
                                       [s.len_output for s in kept],
                                       [s.len_reference for s in kept],
                                       diffs if use_diff else None, l2=self.lc_l2)
        if not self.length_controlled:
            lc = dataclasses.replace(lc, lc_win_rate=None, coefficients={})
        reliable = tally.failure_rate <= self.failure_threshold
        metrics = {"win_rate": lc.win_rate, "lc_win_rate": lc.lc_win_rate,
                   "lc_coefficients": lc.coefficients, "lc_l2": self.lc_l2,
                   "lc_instruction_difficulty": use_diff,
                   **self._metrics(scored, tally, reliable, client), **(extra or {})}
        error = None
        if not reliable:
            error = (f"unreliable: {tally.failed_calls}/{tally.calls} judgments failed after "
                     f"retries ({100 * tally.failure_rate:.1f}% > "
                     f"{100 * self.failure_threshold:.1f}%); "
                     f"{len(scored) - len(kept)} items left out of the win rate")
        return self.finish([s.item for s in scored], metrics, backend, started,
                           score=lc.win_rate, valid=reliable, error=error)

    def _judge_all(self, client: JudgeClient, records: list[dict], instructions: list[str],
                   refs: list[str], outputs: list[str | None]) -> dict[tuple[int, str], Judgment]:
        """Every judgment the items need, `concurrency` at a time: (item index, order) ->
        Judgment. A missing output or one identical to the reference needs none."""
        jobs: dict[tuple[int, str], Any] = {}
        with ThreadPoolExecutor(max_workers=max(1, int(self.concurrency))) as pool:
            for i, (ins, ref, out) in enumerate(zip(instructions, refs, outputs)):
                if out is None or out == ref:
                    continue
                # reference first (the model is B), then the model first (the model is A)
                for order in self.orders(records[i]):
                    a, b = (ref, out) if order == "reference_first" else (out, ref)
                    jobs[(i, order)] = pool.submit(client.judge, ins, a, b)
            return {k: f.result() for k, f in jobs.items()}

    def _judged_item(self, i: int, record: dict, prompt: Any, ref: str, out: str | None,
                     results: dict[tuple[int, str], Judgment], tally: _Tally) -> _JudgedItem:
        """One item of the result: its preference from its judgments (both orders averaged), or
        excluded when a judgment failed; the calls counted into `tally`."""
        item = {"id": record["id"], "prompt": prompt, "output": out, "extracted": None,
                "gold": ref, "error": None, "len_output": len(out) if out is not None else 0,
                "len_reference": len(ref), "judgments": []}
        judged = _JudgedItem(item, len(out) if out is not None else 0, len(ref),
                             record.get("instruction_difficulty"))
        if out is None:
            item.update(preference=0.0, correct=False, score=0.0, error="missing prediction")
            judged.preference, judged.missing = 0.0, True
            return judged
        if out == ref:
            item.update(preference=0.5, correct=False, score=0.5, identical=True)
            judged.preference, judged.identical = 0.5, True
            return judged
        failed, p_model = [], []
        for order in self.orders(record):
            j = results[(i, order)]
            tally.add(j)
            pm = None
            if j.p_b is not None:
                pm = j.p_b if order == "reference_first" else 1.0 - j.p_b
                p_model.append(pm)
            else:
                failed.append(f"{order}: {j.error}")
            item["judgments"].append({"order": order, "verdict": j.verdict, "p_model": pm,
                                      "cached": j.cached, "attempts": j.attempts,
                                      "error": j.error, "raw": j.raw})
        if failed:
            item.update(preference=None, correct=False, score=0.0, excluded=True,
                        error="judge failed: " + "; ".join(failed))
            judged.excluded = True
            return judged
        pref = sum(p_model) / len(p_model)
        item.update(preference=pref, correct=pref > 0.5, score=pref)
        judged.preference = pref
        return judged

    def _metrics(self, scored: list[_JudgedItem], tally: _Tally, reliable: bool,
                 client: JudgeClient) -> dict[str, Any]:
        """The counts, the judge's accounting (calls, tokens, cost) and the settings."""
        cfg = client.config
        cost = (tally.prompt_tokens / 1000.0 * cfg.price_prompt_per_1k
                + tally.completion_tokens / 1000.0 * cfg.price_completion_per_1k)
        prefs = [s.preference for s in scored if s.preference is not None]
        n = len(scored)
        return {
            "n_wins": sum(1 for p in prefs if p > 0.5),
            "n_losses": sum(1 for p in prefs if p < 0.5),
            "n_ties": sum(1 for p in prefs if p == 0.5),
            "n_identical": sum(1 for s in scored if s.identical),
            "n_missing": sum(1 for s in scored if s.missing),
            "n_scored": sum(1 for s in scored if not s.excluded),
            "judge_failures": tally.failed_calls,
            "judge_failed_items": sum(1 for s in scored if s.excluded),
            "judge_failure_rate": tally.failure_rate, "max_failure_rate": self.failure_threshold,
            "swap_positions": self.swap_positions, "judge_template": self.template,
            "spec_judge_model": self.spec_judge_model,
            "reliable": reliable,
            "judge_calls": tally.calls, "judge_cached": tally.cached,
            "judge_http_requests": client.http_calls,
            "tokens": {"prompt": tally.prompt_tokens, "completion": tally.completion_tokens,
                       "total": tally.prompt_tokens + tally.completion_tokens},
            "cost": round(cost, 6), "judge": cfg.public(), "weighted": self.weighted,
            "prompt_version": PROMPT_VERSION,
            "avg_len_output": (sum(s.len_output for s in scored) / n) if n else 0.0,
            "avg_len_reference": (sum(s.len_reference for s in scored) / n) if n else 0.0,
        }

    def grade_model(self, model_path: str | Path, records: list[dict],
                    engine: str = "auto") -> GradeResult:
        started = time.monotonic()
        self.client()  # fail fast on a missing judge before spending time on generation
        prompts = [self.build_prompt(r) for r in records]
        outputs, backend = self.generate(model_path, prompts, engine, n=1)
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
