"""Greedy generation in one pool of sequences that shrinks as they finish and refills from the
queue (continuous batching), so a grader's time follows the tokens it needs, not its batches.

Why: `model.generate` on a batch runs until its longest member ends and keeps computing the rows
that already ended (padding), and a grader's prompts went through in batches of `batch_size`, so
100 prompts with the default 32 cost four times the longest output, each step at the full
batch's price. Here a row leaves the pool the step it ends (eos, `max_new_tokens`, or
`finished(...)`: a stop string, or the grader's answer decided, `answer_stop.py`), and waiting
prompts join as soon as a quarter of the pool is free. Each step costs one forward over the rows
still running.

    outs = greedy_pool(model, [ids_a, ids_b], max_new_tokens=64, eos_ids=[2], pad_id=0,
                       rows=32, finished=lambda i, tokens: False)      # -> token lists

Rows are left-padded in one key/value cache ([pad .. | prompt | generated ..]) with a 2-D
attention mask and explicit position ids, as `generate()` lays out a left-padded batch: a row's
positions count only its own tokens, so the padding a row carries (which changes when rows join)
is masked out and moves no position. Greedy tokens are the argmax of the float32 logits of the
last position, as in `generate()`. Outputs equal `generate()`'s up to floating-point accumulation
order, which padding already changes between batch compositions (tests: the tiny model and
SmolLM2 on the arith prompts, token for token).

Only decoder-only models with a plain full-attention cache are supported
(`prefix_cache.supports`); the engine uses `generate()` for others and for sampling.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from .prefix_cache import _cache_kwarg, _layers

PREFILL_TOKENS = 8192      # padded prompt tokens computed in one prefill forward
REFILL_FRACTION = 4        # waiting prompts join once 1/REFILL_FRACTION of the pool is free
KV_BUDGET_BYTES = 2 << 30  # the pool's key/value cache, for choosing its size (pool_rows)


def kv_bytes_per_token(model) -> int:
    """Bytes of keys and values one token occupies in the cache (all layers)."""
    cfg = model.config.get_text_config(decoder=True) \
        if hasattr(model.config, "get_text_config") else model.config
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    size = next(model.parameters()).element_size()
    return 2 * cfg.num_hidden_layers * heads * head_dim * size


def pool_rows(model, n_prompts: int, longest_prompt: int, max_new_tokens: int,
              batch_size: int, budget: int = KV_BUDGET_BYTES) -> int:
    """How many sequences the pool holds: as many as a `budget`-byte key/value cache fits at
    their longest (prompt + max_new_tokens), at least `batch_size`, at most `n_prompts`."""
    per_row = kv_bytes_per_token(model) * (longest_prompt + max_new_tokens)
    fit = budget // max(per_row, 1)
    return max(1, min(n_prompts, max(batch_size, fit)))


class _Pool:
    """The running rows: their cache, mask, next positions and last tokens."""

    def __init__(self, model):
        import torch
        self.torch = torch
        self.model = model
        self.device = next(model.parameters()).device
        self.cache_kw = _cache_kwarg(model)
        self.rows: list[int] = []          # prompt index of each row
        self.cache = None
        self.mask = None                   # (rows, width) long, 1 = a real token
        self.pos = None                    # (rows,) position of the token fed next
        self.last = None                   # (rows,) token fed next
        self.forwards = 0

    def _forward(self, ids, mask, pos, cache):
        torch = self.torch
        kwargs = {"input_ids": ids, "position_ids": pos, "use_cache": True, "logits_to_keep": 1,
                  self.cache_kw: cache}
        if mask is not None and not bool(mask.all()):
            kwargs["attention_mask"] = mask    # generate() drops an all-ones mask too
        out = self.model(**kwargs)
        self.forwards += 1
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None) or cache
        logits = out.logits[:, -1].to(dtype=torch.float32)
        return cache, logits.argmax(dim=-1)

    def prefill(self, prompts: list[Sequence[int]], pad_id: int):
        """Compute `prompts` (left-padded to the longest); their cache, mask, next positions and
        greedy first tokens."""
        from transformers import DynamicCache
        torch = self.torch
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
            mask[r, width - len(p):] = 1
        pos = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)   # as generate() numbers them
        ids, mask, pos = ids.to(self.device), mask.to(self.device), pos.to(self.device)
        cache, first = self._forward(ids, mask, pos, DynamicCache())
        return cache, mask, mask.sum(-1), first

    def admit(self, rows: list[int], cache, mask, pos, last) -> None:
        """Add prefilled rows, left-padding whichever side is narrower."""
        if self.cache is None:
            self.rows, self.cache, self.mask, self.pos, self.last = \
                list(rows), cache, mask, pos, last
            return
        torch = self.torch
        width = max(self.mask.shape[1], mask.shape[1])
        new_layers = _layers(cache)

        def merge(i: int, k, v):
            k1, v1 = new_layers[i]
            return (torch.cat([_left_pad(k, width, 2), _left_pad(k1, width, 2)]),
                    torch.cat([_left_pad(v, width, 2), _left_pad(v1, width, 2)]))
        self.cache = _rebuild(self.cache, merge)
        self.mask = torch.cat([_left_pad(self.mask, width, 1), _left_pad(mask, width, 1)])
        self.pos = torch.cat([self.pos, pos])
        self.last = torch.cat([self.last, last])
        self.rows += list(rows)

    def keep(self, keep: list[int]) -> None:
        """Keep the rows at these indices (in order) and drop the leading columns no kept row
        uses."""
        torch = self.torch
        if not keep:
            self.rows, self.cache, self.mask, self.pos, self.last = [], None, None, None, None
            return
        idx = torch.tensor(keep, dtype=torch.long, device=self.device)
        mask = self.mask.index_select(0, idx)
        used = mask.any(dim=0).nonzero()
        start = int(used[0]) if len(used) else 0
        self.cache = _rebuild(self.cache, lambda i, k, v: (
            k.index_select(0, idx)[:, :, start:].contiguous(),
            v.index_select(0, idx)[:, :, start:].contiguous()))
        self.mask = mask[:, start:]
        self.pos = self.pos.index_select(0, idx)
        self.last = self.last.index_select(0, idx)
        self.rows = [self.rows[i] for i in keep]

    def step(self):
        """One token for every row."""
        torch = self.torch
        ones = torch.ones((len(self.rows), 1), dtype=self.mask.dtype, device=self.device)
        self.mask = torch.cat([self.mask, ones], dim=1)
        self.cache, nxt = self._forward(self.last[:, None], self.mask, self.pos[:, None],
                                        self.cache)
        self.pos = self.pos + 1
        self.last = nxt
        return nxt


def _left_pad(t, width: int, dim: int):
    import torch
    missing = width - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def _rebuild(cache, fn: Callable):
    """The cache with each layer's (keys, values) replaced by fn(layer index, keys, values), one
    layer at a time in place where the cache keeps `layers` (so the pool never holds two whole
    copies), else as a new DynamicCache."""
    if hasattr(cache, "layers"):
        for i, layer in enumerate(cache.layers):
            layer.keys, layer.values = fn(i, layer.keys, layer.values)
        return cache
    from transformers import DynamicCache
    fresh = DynamicCache()
    for i, (k, v) in enumerate(_layers(cache)):
        fresh.update(*fn(i, k, v), i)
    return fresh


def greedy_pool(model, prompts: Sequence[Sequence[int]], *, max_new_tokens: int,
                eos_ids: Sequence[int], pad_id: int, rows: int,
                finished: Callable[[int, list[int]], bool] | None = None,
                stats: dict | None = None) -> list[list[int]]:
    """Greedy continuations (token ids, eos included when reached) of `prompts`, in input order.

    At most `rows` sequences run at once; prompts enter longest first. A sequence ends at an eos
    token, after `max_new_tokens`, or when `finished(prompt_index, tokens)` says so (called after
    every token of a running sequence)."""
    eos = {int(e) for e in eos_ids}
    rows = max(1, int(rows))
    pending = deque(sorted(range(len(prompts)), key=lambda i: -len(prompts[i])))
    generated: list[list[int]] = [[] for _ in prompts]
    pool = _Pool(model)
    started = time.perf_counter()
    prefill_s = 0.0
    steps = 0
    peak = 0

    def done(i: int) -> bool:
        tokens = generated[i]
        return (tokens[-1] in eos or len(tokens) >= max_new_tokens
                or (finished is not None and finished(i, tokens)))

    fresh: set[int]
    while pending or pool.rows:
        free = rows - len(pool.rows)
        if pending and (not pool.rows or free >= max(1, rows // REFILL_FRACTION)):
            group: list[int] = []
            while pending and len(group) < free:
                width = len(prompts[group[0]]) if group else len(prompts[pending[0]])
                if group and width * (len(group) + 1) > PREFILL_TOKENS:
                    break
                group.append(pending.popleft())
            t0 = time.perf_counter()
            cache, mask, pos, first = pool.prefill([prompts[i] for i in group], pad_id)
            prefill_s += time.perf_counter() - t0
            for i, tok in zip(group, first.tolist()):
                generated[i].append(int(tok))
            pool.admit(group, cache, mask, pos, first)
            fresh = set(group)
        else:
            nxt = pool.step().tolist()
            steps += 1
            for i, tok in zip(pool.rows, nxt):
                generated[i].append(int(tok))
            fresh = set(pool.rows)
        peak = max(peak, len(pool.rows))
        keep = [r for r, i in enumerate(pool.rows) if i not in fresh or not done(i)]
        if len(keep) < len(pool.rows):
            pool.keep(keep)
    if stats is not None:
        stats.update({"pool_rows": rows, "peak_rows": peak, "decode_steps": steps,
                      "forwards": pool.forwards, "prefill_s": round(prefill_s, 3),
                      "seconds": round(time.perf_counter() - started, 3)})
    return generated
