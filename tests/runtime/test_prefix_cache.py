"""The prefix cache (runtime/inference/prefix_cache.py): a multi-turn policy computes only what is
new at each step, and gets exactly what recomputing the whole prompt gives (float32, greedy)."""

from __future__ import annotations

import random
from types import SimpleNamespace
from unittest import mock

import pytest

torch = pytest.importorskip("torch")

from a2c.runtime import inference  # noqa: E402
from a2c.runtime.envs.policy import PREFIX_CACHE_MB, policy_engine_kwargs  # noqa: E402
from a2c.runtime.inference import GenerationSettings  # noqa: E402
from a2c.runtime.inference import prefix_cache as pc  # noqa: E402


@pytest.fixture(scope="module")
def plain(tiny_path):
    backend = inference.load_engine(tiny_path, "transformers", dtype="float32")
    yield backend
    backend.close()


@pytest.fixture()
def cached(tiny_path):
    backend = inference.load_engine(tiny_path, "transformers", dtype="float32",
                                     prefix_cache_mb=64)
    yield backend
    backend.close()


SYSTEM = {"role": "system", "content": "You are playing a text adventure game. Reply with "
                                      "exactly one action from the list and nothing else."}


def conversations(n: int, seed: int = 0) -> list[list[dict]]:
    rng = random.Random(seed)
    things = ["key", "red apple", "old lamp", "brass sword with a long handle", "map", "coin"]
    return [[SYSTEM, {"role": "user", "content": f"Goal: find the {things[i % 6]}.\n\n"
                      f"Observation: a room{' with a table' * rng.randint(0, 6)}.\n\n"
                      f"Valid actions: look, open door, take {things[i % 6]}\n\nAction:"}]
            for i in range(n)]


def advance(convs: list[list[dict]], outputs: list[str], step: int) -> None:
    """The level-3 layout: the action list moves from the previous user message to the new one."""
    for i, (conv, out) in enumerate(zip(convs, outputs)):
        conv[-1] = {"role": "user", "content": conv[-1]["content"].split("\n\nValid")[0]}
        conv.append({"role": "assistant", "content": out.strip()[:30] or "look"})
        conv.append({"role": "user", "content": f"Observation: step {step}{' nothing' * (i % 4)}."
                     f"\n\nValid actions: look, go north\n\nAction:"})


# ------------------------------------------------------------------------------ the pure parts
def test_common_prefix_matches_a_naive_scan():
    rng = random.Random(1)
    for _ in range(300):
        a = [rng.randint(0, 3) for _ in range(rng.randint(0, 40))]
        b = a[: rng.randint(0, len(a))] + [rng.randint(0, 3) for _ in range(rng.randint(0, 9))]
        limit = rng.randint(0, 50)
        naive = 0
        while naive < min(len(a), len(b), limit) and a[naive] == b[naive]:
            naive += 1
        assert pc._common_prefix(a, b, limit) == naive
    assert pc._common_prefix_all([[1, 2, 3, 4], [1, 2, 3, 9], [1, 2, 7]]) == 2
    assert pc._common_prefix_all([[1, 2, 3], [1, 2, 3]]) == 2      # the last token is computed


def _kv(n_tokens: int, layers: int = 2) -> list[tuple]:
    return [(torch.zeros(1, n_tokens, 4), torch.zeros(1, n_tokens, 4)) for _ in range(layers)]


def test_lookup_never_reuses_the_last_prompt_token_and_evicts_least_recently_used():
    per_token = 2 * 2 * 4 * 4                                       # layers x (k, v) x dim x f32
    cache = pc.PrefixCache(max_bytes=25 * per_token)
    cache.store([1, 2, 3, 4, 5], _kv(5))
    assert cache.lookup([1, 2, 3, 4, 5])[1] == 4                  # identical prompt: 4, not 5
    assert cache.lookup([1, 2, 9])[1] == 2 and cache.lookup([7, 8])[1] == 0
    cache.store([1, 2, 3, 4, 5, 6, 7], _kv(7))                     # the 5-token entry is its prefix
    assert len(cache.entries) == 1
    cache.store([2] * 10, _kv(10))
    cache.store([3] * 10, _kv(10))                                 # 27 tokens > 25: oldest goes
    assert [e.tokens[0] for e in cache.entries.values()] == [2, 3]
    assert cache.stats.evictions == 1 and cache.nbytes == 20 * per_token
    cache.lookup([2, 2, 2])                                        # touched: now the newest
    cache.store([4] * 10, _kv(10))
    assert [e.tokens[0] for e in cache.entries.values()] == [2, 4]
    cache.store([5] * 30, _kv(30))                                 # bigger than the cache: skipped
    assert [e.tokens[0] for e in cache.entries.values()] == [2, 4]
    cache.clear()
    assert not cache.entries and cache.nbytes == 0 and cache.stats.prompts == 0


def test_only_plain_full_attention_decoders_are_supported():
    def model(**cfg):
        def forward(input_ids=None, attention_mask=None, position_ids=None, cache=None):
            pass
        config = SimpleNamespace(**{"is_encoder_decoder": False, **cfg})
        return SimpleNamespace(config=config, forward=forward)

    assert pc.supports(model())
    assert pc.supports(model(sliding_window=4096, use_sliding_window=False))    # Qwen2
    assert not pc.supports(model(sliding_window=4096))                          # Mistral
    assert not pc.supports(model(layer_types=["full_attention", "sliding_attention"]))
    assert not pc.supports(model(is_encoder_decoder=True))
    assert not pc.supports(SimpleNamespace(config=SimpleNamespace(is_encoder_decoder=False),
                                           forward=lambda input_ids=None: None))


def test_rollouts_load_the_policy_with_the_cache_unless_turned_off():
    assert policy_engine_kwargs({}) == {"prefix_cache_mb": PREFIX_CACHE_MB}
    assert policy_engine_kwargs({"dtype": "bfloat16", "prefix_cache_mb": 0}) == \
        {"prefix_cache_mb": 0, "dtype": "bfloat16"}


# ------------------------------------------------------------------------------ the model
@pytest.mark.parametrize("max_new_tokens,stop", [(12, ()), (12, ("\n",)), (1, ())])
def test_cached_greedy_equals_recomputing_the_prompt_turn_after_turn(plain, cached,
                                                                      max_new_tokens, stop):
    settings = GenerationSettings(max_new_tokens=max_new_tokens, stop=stop, batch_size=4)
    assert cached.prefix_cache is not None
    convs = conversations(6)
    for step in range(4):
        expected = plain.generate(convs, settings)
        assert cached.generate(convs, settings) == expected, f"step {step}"
        assert cached.last_stats["new_tokens"] == plain.last_stats["new_tokens"]
        advance(convs, expected, step)
    stats = cached.prefix_cache.stats.to_dict()
    assert stats["prompts"] == 24
    # steps 2-4 reuse most of each conversation
    assert stats["reused_tokens"] > 0.4 * stats["prompt_tokens"]


def test_one_at_a_time_through_the_cache_equals_the_batch(plain, cached):
    settings = GenerationSettings(max_new_tokens=10)
    convs = conversations(5, seed=3)
    for step in range(3):
        batched = plain.generate(convs, settings)
        assert [cached.generate([c], settings)[0] for c in convs] == batched
        advance(convs, batched, step)
    assert cached.prefix_cache.stats.reused_tokens > 0


def test_a_prefix_the_whole_batch_shares_is_computed_once(cached):
    settings = GenerationSettings(max_new_tokens=2)
    long_system = {"role": "system", "content": "Rules of the game. " * 40}
    convs = [[long_system, {"role": "user", "content": f"Goal {i}: go {'north ' * i}"}]
             for i in range(6)]
    ids = cached.prompt_ids(convs, settings)
    shared = pc._common_prefix_all(ids)
    assert shared > pc.SHARED_PREFIX_MIN
    computed = []
    real_call = pc._Stepper.__call__

    def spy(self, cache, visible, input_ids, positions):
        if input_ids.shape[1] > 1:
            computed.append(input_ids.numel())
        return real_call(self, cache, visible, input_ids, positions)

    with mock.patch.object(pc._Stepper, "__call__", spy):
        cached.generate(convs, settings)
    tails = sum(len(x) - shared for x in ids)
    assert sum(computed) <= shared + 1.2 * tails < sum(len(x) for x in ids)


def test_sampling_does_not_use_the_cache_and_still_works(cached):
    settings = GenerationSettings(max_new_tokens=5, temperature=1.0, seed=3)
    out = cached.sample(conversations(2), settings, n=3)
    assert [len(x) for x in out] == [3, 3]
    assert cached.prefix_cache.stats.prompts == 0
    cached.reset_prefix_cache()


def test_prefix_cache_zero_or_unsupported_model_means_no_cache(tiny_path):
    backend = inference.load_engine(tiny_path, "transformers", prefix_cache_mb=0)
    try:
        assert backend.prefix_cache is None
        backend.reset_prefix_cache()                      # harmless without a cache
    finally:
        backend.close()
    with mock.patch.object(pc, "supports", return_value=False):
        backend = inference.load_engine(tiny_path, "transformers", prefix_cache_mb=64)
        try:
            assert backend.prefix_cache is None
        finally:
            backend.close()
