"""a2c.runtime.models: built-ins (deterministic, cached, locked, atomic), path/hub resolution, CLI."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from a2c.runtime import models
from a2c.runtime.models import ModelError


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def _tiny_built(tmp_path_factory):
    from unittest import mock
    root = tmp_path_factory.mktemp("warm-cache")
    with mock.patch.dict("os.environ", {"A2C_CACHE": str(root)}):
        models.prepare_builtin("tiny")
    return root


@pytest.fixture()
def warm_cache(_tiny_built, monkeypatch):
    """A cache where tiny is already built (read-only use)."""
    monkeypatch.setenv("A2C_CACHE", str(_tiny_built))
    return _tiny_built


def _files(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def test_tiny_is_byte_identical_for_a_seed(tmp_path, monkeypatch):
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "a"))
    first = models.resolve_base_model({"builtin": "tiny"})
    monkeypatch.setenv("A2C_CACHE", str(tmp_path / "b"))
    second = models.resolve_base_model({"builtin": "tiny"})
    assert first != second
    assert _files(first) == _files(second)
    assert models.model_fingerprint(first) == models.model_fingerprint(second)
    other = models.resolve_base_model({"builtin": "tiny", "seed": 1})
    assert other.name == "tiny-seed1"
    assert models.model_fingerprint(other) != models.model_fingerprint(second)
    assert (first / "model.safetensors").stat().st_size < 1_000_000


def test_tiny_loads_with_a_chat_template(warm_cache):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path = models.prepare_builtin("tiny")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.model_type == "qwen2"
    assert model.config.hidden_size // model.config.num_attention_heads == 32
    assert 50_000 < sum(p.numel() for p in model.parameters()) < 500_000
    text = tok.apply_chat_template([{"role": "user", "content": "What is 2 plus 3?"}],
                                   tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nWhat is 2 plus 3?<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>"
    ids = tok("What is 12 plus 34? #### 46")["input_ids"]
    assert tok.decode(ids) == "What is 12 plus 34? #### 46"


def test_prepare_is_cached_and_force_rebuilds(cache):
    path = models.prepare_builtin("tiny")
    stamp = (path / "model.safetensors").stat().st_mtime_ns
    assert models.prepare_builtin("tiny") == path
    assert (path / "model.safetensors").stat().st_mtime_ns == stamp
    time.sleep(0.01)
    assert models.prepare_builtin("tiny", force=True) == path
    assert (path / "model.safetensors").stat().st_mtime_ns != stamp
    assert models.is_prepared("tiny")
    assert not list(path.parent.glob(".tiny.tmp-*")) and not list(path.parent.glob(".tiny.old-*"))


def _fake_builtin(monkeypatch, name, build):
    monkeypatch.setitem(models.BUILTINS, name, models.BuiltinModel(name, "test", build))


def test_concurrent_prepare_builds_once(cache, monkeypatch):
    calls = []

    def build(out_dir: Path, seed: int) -> None:
        calls.append(out_dir)
        time.sleep(0.3)
        (out_dir / "config.json").write_text("{}")
        (out_dir / "model.safetensors").write_bytes(b"x")

    _fake_builtin(monkeypatch, "fake-slow", build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(models.prepare_builtin("fake-slow")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(set(results)) == 1 and len(results) == 4


def test_failed_build_leaves_nothing_behind(cache, monkeypatch):
    def build(out_dir: Path, seed: int) -> None:
        (out_dir / "config.json").write_text("{}")
        raise RuntimeError("boom")

    _fake_builtin(monkeypatch, "fake-broken", build)
    with pytest.raises(RuntimeError, match="boom"):
        models.prepare_builtin("fake-broken")
    target = models.builtin_dir("fake-broken")
    assert not target.exists()
    assert not list(target.parent.glob(".fake-broken.tmp-*"))


def test_unknown_builtin(cache):
    with pytest.raises(ModelError, match="unknown built-in model 'huge'.*smollm2-135m-instruct.*tiny"):
        models.resolve_base_model({"builtin": "huge"})


def test_path_form(warm_cache, tmp_path):
    tiny = models.prepare_builtin("tiny")
    assert models.resolve_base_model({"path": str(tiny)}) == tiny.resolve()
    bundle = tmp_path / "bundle"
    (bundle / "models").mkdir(parents=True)
    (bundle / "models" / "m").symlink_to(tiny)
    assert models.resolve_base_model({"path": "models/m"}, bundle_root=bundle) == tiny.resolve()
    with pytest.raises(ModelError, match="does not exist"):
        models.resolve_base_model({"path": str(tmp_path / "missing")})
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match="config.json is missing"):
        models.resolve_base_model({"path": str(empty)})
    (empty / "config.json").write_text("{}")
    with pytest.raises(ModelError, match="no weights"):
        models.resolve_base_model({"path": str(empty)})
    (empty / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(ModelError, match="cannot load model"):
        models.load_check(empty)
    models.load_check(tiny)


def test_hub_form_uses_the_local_cache_only(warm_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.delenv("A2C_HUB_DOWNLOAD", raising=False)
    import huggingface_hub.constants as hc
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(ModelError) as info:
        models.resolve_base_model({"hub": "Qwen/Qwen3-8B-Base", "revision": "main"})
    msg = str(info.value)
    assert "not in the local Hugging Face cache" in msg
    assert "hf download Qwen/Qwen3-8B-Base --revision main" in msg
    # a model present in the cache resolves to its snapshot folder
    tiny = models.prepare_builtin("tiny")
    snap = tmp_path / "hf" / "hub" / "models--acme--tiny" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    for f in tiny.iterdir():
        (snap / f.name).write_bytes(f.read_bytes())
    (snap.parent.parent / "refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text("a" * 40)
    assert models.resolve_base_model({"hub": "acme/tiny", "revision": "main"}) == snap.resolve()


def test_bad_config(cache):
    with pytest.raises(ModelError, match="one of builtin, path or hub"):
        models.resolve_base_model({"id": "x"})


def test_cli_list_and_prepare(warm_cache, capsys):
    from a2c.cli import main
    assert main(["models", "prepare", "tiny"]) == 0
    out = capsys.readouterr().out
    path = models.builtin_dir("tiny")
    assert f"path: {path}" in out
    assert f"fingerprint: {models.model_fingerprint(path)}" in out
    assert main(["models", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["models"]}
    assert rows["tiny"]["prepared"] is True
    assert "smollm2-135m-instruct" in rows
    assert main(["models", "prepare", "nope"]) != 0
    assert "unknown built-in model" in capsys.readouterr().err


@pytest.mark.slow
def test_smollm2_converted_from_the_packaged_gguf(cache):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    started = time.monotonic()
    path = models.resolve_base_model({"builtin": "smollm2-135m-instruct"})
    assert (path / "model.safetensors").is_file()
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    assert tok.chat_template and tok.eos_token == "<|im_end|>"
    fp = models.model_fingerprint(path)
    assert models.resolve_base_model({"builtin": "smollm2-135m-instruct"}) == path
    assert models.model_fingerprint(path) == fp
    assert time.monotonic() - started < 170
