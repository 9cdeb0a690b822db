"""a2c.runtime.inference: settings, prompt construction, the transformers engine on the tiny model.

The key property: batched greedy generation returns exactly what per-item greedy generation does,
in input order, whatever the batch size.
"""

from __future__ import annotations

import time

import pytest

from a2c.runtime import inference
from a2c.runtime.inference import GenerationSettings, InferenceError, loading
from a2c.runtime.inference.prompts import build_prompt_ids, cut_at_stop, prompt_text


@pytest.fixture(scope="module")
def tiny(tiny_path):
    backend = inference.load_engine(tiny_path, "transformers")
    yield backend
    backend.close()


def arith_prompts(n: int) -> list:
    from a2c.runtime.data.generators import arithmetic
    recs = arithmetic({"train_size": 0, "test_size": n}, 3, None)["test"]
    prompts: list = [r["question"] for r in recs]
    # vary lengths a lot, and mix in chat-message prompts
    for i in range(0, n, 5):
        prompts[i] = prompts[i] + " Think step by step, then answer." * (i % 3)
    for i in range(2, n, 7):
        prompts[i] = [{"role": "system", "content": "You add numbers."},
                      {"role": "user", "content": recs[i]["question"]}]
    return prompts


# ------------------------------------------------------------------------------ settings
def test_settings_from_a_grader_inference_block():
    cfg = {"engine": "auto", "max_new_tokens": 32, "temperature": 0, "top_p": 1.0, "stop": ["\n\n"],
           "batch_size": 100, "chat_template": "auto", "n_samples": 1, "seed": 0,
           "prompt_template": "{prompt}"}
    s = GenerationSettings.from_config(cfg)
    assert (s.max_new_tokens, s.temperature, s.stop, s.batch_size, s.chat_template) == \
        (32, 0.0, ("\n\n",), 100, "auto")
    assert s.greedy and s.extra == {"engine": "auto", "prompt_template": "{prompt}"}
    assert GenerationSettings.from_config(None) == GenerationSettings()
    assert GenerationSettings.from_config({"chat_template": "false"}).chat_template is False
    assert GenerationSettings.from_config({"stop": "###"}).stop == ("###",)
    assert GenerationSettings.from_config({"temperature": None}).temperature == 0.0
    assert s.to_dict()["stop"] == ["\n\n"]
    hash(s)
    for bad in ({"max_new_tokens": 0}, {"temperature": -1}, {"top_p": 0}, {"batch_size": 0},
                {"chat_template": "maybe"}):
        with pytest.raises(InferenceError):
            GenerationSettings.from_config(bad)


def test_engine_kind_resolution(tiny_path, monkeypatch):
    monkeypatch.setattr(loading, "cuda_available", lambda: False)
    assert inference.resolve_kind("auto") == "transformers"
    monkeypatch.setattr(loading, "cuda_available", lambda: True)
    monkeypatch.setattr(loading, "vllm_installed", lambda: True)
    assert inference.resolve_kind("auto") == "vllm"
    monkeypatch.setattr(loading, "vllm_installed", lambda: False)
    assert inference.resolve_kind("auto") == "transformers"
    with pytest.raises(InferenceError, match="unknown inference engine"):
        inference.resolve_kind("tgi")
    with pytest.raises(InferenceError, match="not a model folder"):
        inference.load_engine(tiny_path.parent, "transformers")


def test_vllm_missing_is_a_clear_error(tiny_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_vllm(name, *args, **kwargs):
        if name == "vllm" or name.startswith("vllm."):
            raise ImportError("No module named 'vllm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(InferenceError, match="needs vLLM.*engine: transformers"):
        inference.load_engine(tiny_path, "vllm")


# ------------------------------------------------------------------------------ prompts
def test_prompt_construction(tiny):
    tok = tiny.tokenizer
    text, chat = prompt_text(tok, "What is 1 plus 2?")
    assert chat and text == "<|im_start|>user\nWhat is 1 plus 2?<|im_end|>\n<|im_start|>assistant\n"
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    text, _ = prompt_text(tok, msgs)
    assert text.startswith("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU")
    assert prompt_text(tok, "raw", chat_template=False) == ("raw", False)
    assert prompt_text(tok, msgs, chat_template=False) == ("S\n\nU", False)
    ids = build_prompt_ids(tok, "What is 1 plus 2?")
    assert tok.decode(ids) == prompt_text(tok, "What is 1 plus 2?")[0]
    with pytest.raises(InferenceError, match="string or a list of chat messages"):
        prompt_text(tok, 42)


def test_chat_template_true_without_one(tiny):
    tok = tiny.tokenizer
    saved = tok.chat_template
    try:
        tok.chat_template = None
        assert prompt_text(tok, "x") == ("x", False)
        with pytest.raises(InferenceError, match="no chat template"):
            prompt_text(tok, "x", chat_template=True)
    finally:
        tok.chat_template = saved


def test_cut_at_stop():
    assert cut_at_stop("a\n\nb####c", ["####", "\n\n"]) == "a"
    assert cut_at_stop("abc", []) == "abc"
    assert cut_at_stop("abc", ["", "z"]) == "abc"
    assert cut_at_stop("#### 5\nmore", ["\n"]) == "#### 5"


# ------------------------------------------------------------------------------ generation
def test_batched_greedy_equals_per_item_greedy(tiny):
    prompts = arith_prompts(16)
    settings = GenerationSettings(max_new_tokens=16, batch_size=6)
    started = time.monotonic()
    batched = tiny.generate(prompts, settings)
    batched_s = time.monotonic() - started
    single = [tiny.generate([p], GenerationSettings(max_new_tokens=16, batch_size=1))[0]
              for p in prompts]
    assert batched == single
    assert len(set(batched)) > 5          # the tiny model's outputs do depend on the prompt
    assert tiny.generate(prompts, GenerationSettings(max_new_tokens=16, batch_size=16)) == single
    assert batched_s < 60


def test_results_come_back_in_input_order(tiny):
    prompts = arith_prompts(8)
    settings = GenerationSettings(max_new_tokens=8, batch_size=3)
    forward = tiny.generate(prompts, settings)
    backward = tiny.generate(list(reversed(prompts)), settings)
    assert backward == list(reversed(forward))
    assert tiny.generate([], settings) == []


def test_max_new_tokens_and_stop_sequences(tiny):
    prompts = arith_prompts(6)
    full = tiny.generate(prompts, GenerationSettings(max_new_tokens=20))
    assert max(tiny.last_stats["new_tokens"]) <= 20 and tiny.last_stats["prompts"] == 6
    stop = "e"
    cut = tiny.generate(prompts, GenerationSettings(max_new_tokens=20, stop=(stop,)))
    assert cut == [cut_at_stop(o, [stop]) for o in full]
    assert any(stop in o for o in full) and not any(stop in o for o in cut)
    tiny.generate(prompts, GenerationSettings(max_new_tokens=3))
    assert max(tiny.last_stats["new_tokens"]) <= 3


def test_sampling_is_seeded_and_greedy_n_repeats(tiny):
    prompts = arith_prompts(3)
    hot = GenerationSettings(max_new_tokens=10, temperature=1.0, seed=5)
    a = tiny.sample(prompts, hot, n=3)
    b = tiny.sample(prompts, hot, n=3)
    assert a == b and len(a) == 3 and all(len(x) == 3 for x in a)
    assert len(set(a[0])) > 1
    c = tiny.sample(prompts, GenerationSettings(max_new_tokens=10, temperature=1.0, seed=6), n=3)
    assert c != a
    greedy = tiny.sample(prompts, GenerationSettings(max_new_tokens=10), n=4)
    plain = tiny.generate(prompts, GenerationSettings(max_new_tokens=10))
    assert greedy == [[p] * 4 for p in plain]
    assert tiny.generate(prompts, hot) == [x[0] for x in tiny.sample(prompts, hot, n=1)]


def test_generate_records_carries_the_engine_name(tiny):
    recs = [{"id": "a", "prompt": "What is 1 plus 2?", "answer": "3"},
            {"id": "b", "prompt": "What is 2 plus 2?", "answer": "4"}]
    out = inference.generate_records(tiny, recs, GenerationSettings(max_new_tokens=4),
                                     prompt_template="Q: {prompt}")
    assert [o["id"] for o in out] == ["a", "b"]
    assert out[0]["prompt"] == "Q: What is 1 plus 2?" and out[0]["backend"] == "transformers"
    assert isinstance(tiny, inference.InferenceEngine)
    with pytest.raises(InferenceError, match="cannot be filled"):
        inference.render_prompt("{question}", recs[0])


def test_unloadable_model_is_an_inference_error(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')
    with pytest.raises(InferenceError, match="cannot load model"):
        inference.load_engine(tmp_path, "transformers")


@pytest.mark.slow
def test_smollm2_batched_greedy_equals_per_item(tmp_path):
    from a2c.runtime.models import prepare_builtin
    path = prepare_builtin("smollm2-135m-instruct")   # the user's cache: converted once
    backend = inference.load_engine(path, "transformers")
    try:
        prompts = arith_prompts(16)
        settings = GenerationSettings(max_new_tokens=32, batch_size=16)
        started = time.monotonic()
        batched = backend.generate(prompts, settings)
        batched_s = time.monotonic() - started
        started = time.monotonic()
        single = [backend.generate([p], GenerationSettings(max_new_tokens=32, batch_size=1))[0]
                  for p in prompts]
        single_s = time.monotonic() - started
        assert batched == single
        assert sum("+" in o or "plus" in o for o in batched) >= 8   # a real model answers
        assert batched_s < single_s
    finally:
        backend.close()
