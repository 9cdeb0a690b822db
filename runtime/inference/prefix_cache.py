"""Greedy generation that reuses the key/value cache of earlier prompts (prefix caching).

Why: a level-3 policy sees, at step t, the whole conversation of steps 1..t-1 again. Recomputing
it every step makes prefill (compute-bound on a CPU, the same cost batched or not) dominate the
rollout; with the cache, each step computes only what is new since the episode's last call — the
action and the new observation — and the batched decoding, which lockstep rollouts exist for,
becomes most of the work. vLLM does the same on its side (automatic prefix caching).

    cache = PrefixCache(max_bytes=1 << 30)
    outs = greedy_generate(model, [ids_a, ids_b], max_new_tokens=16, eos_ids=[2], pad_id=0,
                           stop_check=lambda tokens: False, cache=cache)   # -> token lists

The cache is a pool of (tokens, per-layer keys/values) entries with least-recently-used
eviction by size; a prompt reuses the entry sharing its longest token prefix (any entry: episodes
also share the system message). Rows of a batch carry different cached lengths and different
numbers of new tokens, so each row is laid out as

    [pad .. | cached prefix of row i | pad .. | new tokens of row i | generated ..]

with a 4-D additive mask (a key is visible if it is a real token of the row and not after the
query in storage order) and explicit position ids (a token's position is its index in its own
sequence, so the rotary embedding of a cached key is the one it was computed with).

Only greedy decoding and decoder-only models with a plain full-attention cache are supported
(`supports(model)`); the engine falls back to `generate()` otherwise. Results equal recomputing
the prompt up to floating-point accumulation order (bit-identical in float32 on the tests' models;
bf16 can flip a near-tie, as batching already can).
"""

from __future__ import annotations

import inspect
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class _Entry:
    tokens: list[int]
    kv: list[tuple]          # per layer: (keys [heads, len, dim], values [heads, len, dim])
    nbytes: int


@dataclass
class CacheStats:
    prompts: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0          # prompt tokens whose keys/values came from the cache
    evictions: int = 0
    prefill_s: float = 0.0          # time computing prompts (incl. a batch's shared prefix)
    decode_s: float = 0.0           # time generating, one token per forward for the whole batch
    decode_forwards: int = 0

    def to_dict(self) -> dict:
        return {"prompts": self.prompts, "prompt_tokens": self.prompt_tokens,
                "reused_tokens": self.reused_tokens, "computed_tokens":
                    self.prompt_tokens - self.reused_tokens, "evictions": self.evictions,
                "prefill_s": round(self.prefill_s, 3), "decode_s": round(self.decode_s, 3),
                "decode_forwards": self.decode_forwards}


class PrefixCache:
    """Recently computed sequences and their keys/values, looked up by longest common prefix."""

    def __init__(self, max_bytes: int = 1 << 30):
        self.max_bytes = int(max_bytes)
        self.entries: OrderedDict[int, _Entry] = OrderedDict()
        self.nbytes = 0
        self.stats = CacheStats()
        self._next = 0

    def lookup(self, ids: Sequence[int]) -> tuple[_Entry | None, int]:
        """The entry sharing the longest prefix with `ids`, and that length (< len(ids): the
        last prompt token is always computed, its logits give the first new token)."""
        best, best_len, best_key = None, 0, None
        limit = len(ids) - 1
        for key, entry in self.entries.items():
            n = _common_prefix(entry.tokens, ids, limit)
            if n > best_len:
                best, best_len, best_key = entry, n, key
        if best_key is not None:
            self.entries.move_to_end(best_key)
        return best, best_len

    def count(self, prompt_tokens: int, reused_tokens: int) -> None:
        self.stats.prompts += 1
        self.stats.prompt_tokens += prompt_tokens
        self.stats.reused_tokens += reused_tokens

    def store(self, tokens: list[int], kv: list[tuple]) -> None:
        """Keep `tokens` and their keys/values, evicting the least recently used entries beyond
        `max_bytes`. An episode's superseded entry (its previous step) is matched once more at the
        next step and then never again, so it is among the first to go; it is not dropped at once
        because another episode may be built on it (a shared few-shot head)."""
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if nbytes > self.max_bytes:
            return
        # an entry that is a prefix of the new one adds nothing
        for key in [k for k, e in self.entries.items()
                    if len(e.tokens) <= len(tokens) and tokens[:len(e.tokens)] == e.tokens]:
            self.nbytes -= self.entries.pop(key).nbytes
        while self.entries and self.nbytes + nbytes > self.max_bytes:
            _, old = self.entries.popitem(last=False)
            self.nbytes -= old.nbytes
            self.stats.evictions += 1
        self.entries[self._next] = _Entry(list(tokens), kv, nbytes)
        self._next += 1
        self.nbytes += nbytes

    def clear(self) -> None:
        """Forget every entry and the counters (a benchmark's modes must not share a cache)."""
        self.entries.clear()
        self.nbytes = 0
        self.stats = CacheStats()


def _common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    if n <= 0:
        return 0
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n                 # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _common_prefix_all(prompts: Sequence[Sequence[int]]) -> int:
    if not prompts:
        return 0
    n = min(len(p) for p in prompts) - 1
    for p in prompts[1:]:
        n = _common_prefix(prompts[0], p, n)
    return max(n, 0)


def supports(model) -> bool:
    """A decoder-only model whose cache is plain full attention (no sliding window, no state)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "is_encoder_decoder", False):
        return False
    text = cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return False
    types = set(getattr(text, "layer_types", None) or ["full_attention"])
    if types != {"full_attention"}:
        return False
    params = inspect.signature(model.forward).parameters
    return "position_ids" in params and ("cache" in params or "past_key_values" in params)


def _cache_kwarg(model) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _layers(cache) -> list[tuple]:
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def _batch_cache(kv_rows: list[list[tuple] | None], lengths: list[int], n_layers: int, width: int):
    """A DynamicCache of `width` slots holding each row's keys/values right-aligned (rows without
    any get zeros), and the (rows, width) mask of the slots that hold real tokens."""
    import torch
    from transformers import DynamicCache

    rows = len(kv_rows)
    ref = next((kv for kv, n in zip(kv_rows, lengths) if n), None)
    device = ref[0][0].device if ref else "cpu"
    visible = torch.zeros((rows, width), dtype=torch.bool, device=device)
    cache = DynamicCache()
    if ref is None:
        return cache, visible
    for r, n in enumerate(lengths):
        visible[r, width - n:] = True
    for layer in range(n_layers):
        k0, v0 = ref[layer]
        keys = k0.new_zeros((rows, k0.shape[0], width, k0.shape[2]))
        values = v0.new_zeros((rows, v0.shape[0], width, v0.shape[2]))
        for r, n in enumerate(lengths):
            if n:
                keys[r, :, width - n:] = kv_rows[r][layer][0][:, :n]
                values[r, :, width - n:] = kv_rows[r][layer][1][:, :n]
        cache.update(keys, values, layer)
    return cache, visible


class _Stepper:
    """One forward over a batch cache with per-row holes: mask and positions built here."""

    def __init__(self, model):
        self.model = model
        self.param = next(model.parameters())
        self.cache_kw = _cache_kwarg(model)
        cfg = model.config.get_text_config(decoder=True) \
            if hasattr(model.config, "get_text_config") else model.config
        self.n_layers = cfg.num_hidden_layers

    def __call__(self, cache, visible, input_ids, positions):
        """`visible` covers the cached slots and the new ones (the last input_ids.shape[1])."""
        import torch
        total, q = visible.shape[1], input_ids.shape[1]
        device = self.param.device
        causal = torch.arange(total, device=device)[None, :] <= \
            torch.arange(total - q, total, device=device)[:, None]
        allowed = visible[:, None, None, :] & causal[None, None]
        mask = torch.zeros(allowed.shape, dtype=self.param.dtype, device=device)
        mask.masked_fill_(~allowed, torch.finfo(self.param.dtype).min)
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                         use_cache=True, logits_to_keep=1, **{self.cache_kw: cache})
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None) or cache
        return cache, out.logits[:, -1, :].argmax(dim=-1).tolist()


def _length_groups(order: list[int], lengths: list[int], slack: float = 1.15) -> list[list[int]]:
    """Consecutive rows of `order` (longest first) grouped so padding stays under ~15%: prefill
    is compute-bound, so padding is pure waste and only similar lengths are worth batching."""
    groups: list[list[int]] = []
    for r in order:
        g = groups[-1] if groups else None
        if g and lengths[g[0]] * (len(g) + 1) <= slack * (sum(lengths[i] for i in g) + lengths[r]):
            g.append(r)
        else:
            groups.append([r])
    return groups


def _prefill(step: _Stepper, prompts: list[Sequence[int]], matches: list[tuple], pad_id: int):
    """Compute the uncached tail of each prompt (one batch, tails left-padded): per-row
    keys/values of the whole prompt, and the greedy next token."""
    import torch

    device = step.param.device
    past = [n for _, n in matches]
    n_new = max(len(p) - n for p, n in zip(prompts, past))
    kv_cache, visible = _batch_cache([e.kv if n else None for e, n in matches], past,
                                     step.n_layers, max(past))
    ids = torch.full((len(prompts), n_new), pad_id, dtype=torch.long, device=device)
    pos = torch.zeros((len(prompts), n_new), dtype=torch.long, device=device)
    new_visible = torch.zeros((len(prompts), n_new), dtype=torch.bool, device=device)
    for g, (prompt, n) in enumerate(zip(prompts, past)):
        tail = list(prompt[n:])
        ids[g, n_new - len(tail):] = torch.tensor(tail, dtype=torch.long)
        pos[g, n_new - len(tail):] = torch.arange(n, len(prompt))
        new_visible[g, n_new - len(tail):] = True
    visible = torch.cat([visible.to(device), new_visible], dim=1)
    kv_cache, next_ids = step(kv_cache, visible, ids, pos)
    layers = _layers(kv_cache)
    rows_kv = []
    for g in range(len(prompts)):
        idx = visible[g].nonzero().flatten()
        rows_kv.append([(k[g, :, idx], v[g, :, idx]) for k, v in layers])
    return rows_kv, [int(t) for t in next_ids]


SHARED_PREFIX_MIN = 32     # tokens; a batch's common prefix at least this long is computed once


def greedy_generate(model, prompts: Sequence[Sequence[int]], *, max_new_tokens: int,
                    eos_ids: Sequence[int], pad_id: int,
                    stop_check: Callable[[list[int]], bool],
                    cache: PrefixCache) -> list[list[int]]:
    """Greedy continuations of `prompts` (token ids) as one batch; each row ends at an eos token
    (included), when `stop_check(generated_tokens)` says so, or after `max_new_tokens`.

    Three phases: a prefix that every prompt shares and the cache lacks (the system message of
    fresh episodes) is computed once; then the prompts' remaining tokens, in groups of similar
    length (no padding to speak of); then all rows decode together, one token per forward."""
    import torch

    step = _Stepper(model)
    device = step.param.device
    rows = len(prompts)
    started = time.perf_counter()
    shared = _common_prefix_all(prompts)
    if rows > 1 and shared >= SHARED_PREFIX_MIN:
        head = list(prompts[0][:shared])
        entry, n = cache.lookup(head + [-1])         # -1: no token, so all of `head` may match
        if n < shared - SHARED_PREFIX_MIN // 2:
            kv, _ = _prefill(step, [head], [(entry, n)], pad_id)
            cache.store(head, [(k.contiguous(), v.contiguous()) for k, v in kv[0]])
    matches = [cache.lookup(p) for p in prompts]
    for p, (_, n) in zip(prompts, matches):
        cache.count(len(p), n)
    new_len = [len(p) - n for p, (_, n) in zip(prompts, matches)]
    order = sorted(range(rows), key=lambda r: -new_len[r])
    prompt_kv: list[list[tuple] | None] = [None] * rows
    first: list[int] = [0] * rows
    for group in _length_groups(order, new_len):
        kv, next_ids = _prefill(step, [prompts[r] for r in group], [matches[r] for r in group],
                                pad_id)
        for g, r in enumerate(group):
            prompt_kv[r], first[r] = kv[g], next_ids[g]

    decode_started = time.perf_counter()
    cache.stats.prefill_s += decode_started - started
    eos = {int(e) for e in eos_ids}
    generated = [[first[r]] for r in range(rows)]
    active = [not (first[r] in eos or stop_check(generated[r])) for r in range(rows)]
    lengths = [len(p) for p in prompts]
    kv_cache, visible = _batch_cache(prompt_kv, lengths, step.n_layers, max(lengths))
    prompt_kv = [None] * rows            # the batch cache holds them now
    for _ in range(max_new_tokens - 1):
        if not any(active):
            break
        feed = [generated[r][-1] if active[r] else pad_id for r in range(rows)]
        ids = torch.tensor(feed, dtype=torch.long, device=device)[:, None]
        pos = torch.tensor([lengths[r] + len(generated[r]) - 1 for r in range(rows)],
                           device=device)[:, None]
        visible = torch.cat([visible, torch.tensor(active, device=device)[:, None]], dim=1)
        kv_cache, next_ids = step(kv_cache, visible, ids, pos)
        cache.stats.decode_forwards += 1
        for r in range(rows):
            if active[r]:
                generated[r].append(int(next_ids[r]))
                if generated[r][-1] in eos or stop_check(generated[r]):
                    active[r] = False

    cache.stats.decode_s += time.perf_counter() - decode_started

    # keep every row's computed sequence: the prompt and the generated tokens fed back
    layers = _layers(kv_cache)
    for r in range(rows):
        idx = visible[r].nonzero().flatten()
        fed = generated[r][:len(idx) - lengths[r]]
        cache.store(list(prompts[r]) + fed,
                    [(k[r, :, idx].contiguous(), v[r, :, idx].contiguous()) for k, v in layers])
    return generated
