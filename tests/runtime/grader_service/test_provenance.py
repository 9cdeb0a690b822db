"""Provenance of a submission against its base model (tiny model): a fine-tuned copy is derived,
another model's weights, a re-initialised model and another architecture are not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import load_file, save_file  # noqa: E402

from a2c.runtime.grader_service.provenance import check_provenance, layer_group  # noqa: E402


def weights_file(folder: Path) -> Path:
    (path,) = sorted(folder.glob("*.safetensors"))
    return path


def variant(base: Path, out: Path, change) -> Path:
    """A copy of `base` with its tensors passed through change(name, tensor)."""
    shutil.copytree(base, out)
    path = weights_file(out)
    tensors = load_file(path)
    save_file({k: change(k, v).contiguous() for k, v in tensors.items()}, path,
              metadata={"format": "pt"})
    return out


def test_layer_groups():
    assert layer_group("model.layers.3.self_attn.q_proj.weight") == "layers.003"
    assert layer_group("model.embed_tokens.weight") == "embed"
    assert layer_group("model.norm.weight") == "other"


def test_fine_tuned_copy_is_derived(tiny_path, tmp_path):
    gen = torch.Generator().manual_seed(0)

    def nudge(name, t):   # what a few optimiser steps do: small moves on most tensors
        if "layers.0." in name and t.dtype.is_floating_point:
            return t + 1e-3 * torch.randn(t.shape, generator=gen, dtype=t.dtype)
        return t

    tuned = variant(tiny_path, tmp_path / "tuned", nudge)
    prov = check_provenance(tuned, tiny_path)
    assert prov.not_derived is False, prov
    assert prov.same_architecture and prov.same_tokenizer
    w = prov.weights
    assert 0 < w["changed_fraction"] < 1
    assert w["relative_change"]["layers.000"] > 0 and w["relative_change"]["embed"] == 0
    assert check_provenance(tiny_path, tiny_path).weights["changed_fraction"] == 0


def test_another_models_weights_are_not_derived(tiny_path, tmp_path, monkeypatch):
    """The tiny model built from another seed: its own tokenizer and weights."""
    from a2c.runtime.models import prepare_builtin
    monkeypatch.setenv("A2C_CACHE", str(tiny_path.parents[1]))
    other = prepare_builtin("tiny", seed=1)
    prov = check_provenance(other, tiny_path)
    assert prov.not_derived is True, prov
    # the same with the base's tokenizer: only the weights give it away
    swapped = tmp_path / "swapped"
    shutil.copytree(tiny_path, swapped)
    shutil.copy2(weights_file(other), weights_file(swapped))
    prov = check_provenance(swapped, tiny_path)
    assert prov.same_tokenizer is True and prov.not_derived is True
    assert prov.weights["median_relative_change"] > 0.5
    assert any("moved" in r for r in prov.reasons)


def test_reinitialised_model_is_not_derived(tiny_path, tmp_path):
    gen = torch.Generator().manual_seed(7)

    def reinit(name, t):   # a fresh init; layer norms kept at their ones
        if t.dim() < 2:
            return t
        return 0.02 * torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.dtype)

    prov = check_provenance(variant(tiny_path, tmp_path / "reinit", reinit), tiny_path)
    assert prov.not_derived is True, prov


def test_other_architecture_is_not_derived(tiny_path, tmp_path):
    other = tmp_path / "wider"
    shutil.copytree(tiny_path, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["num_hidden_layers"] = cfg["num_hidden_layers"] + 1
    (other / "config.json").write_text(json.dumps(cfg))
    prov = check_provenance(other, tiny_path)
    assert prov.not_derived is True and prov.same_architecture is False


def test_bf16_submission_of_the_base_is_derived(tiny_path, tmp_path):
    """Saved in bf16 (what many trainers write): rounding, not a move away from the base."""
    half = variant(tiny_path, tmp_path / "bf16",
                   lambda n, t: t.to(torch.bfloat16) if t.dtype.is_floating_point else t)
    prov = check_provenance(half, tiny_path)
    assert prov.not_derived is False
    assert prov.weights["median_relative_change"] < 0.01


def test_service_flags_a_submission_with_another_models_weights(tiny_path, tmp_path, make_run,
                                                                monkeypatch):
    """Submitted through the grader: the record (journal, event, results file) and the report's
    provenance section name the swapped model, not the fine-tuned one."""
    import time

    from a2c.analysis.record import RunRecord
    from a2c.analysis.trust import provenance
    from a2c.contracts.events import read_events
    from a2c.contracts.service_config import ServiceConfig
    from a2c.runtime.grader_service.core import GraderService
    from a2c.runtime.models import prepare_builtin

    monkeypatch.setenv("A2C_CACHE", str(tiny_path.parents[1]))
    other = prepare_builtin("tiny", seed=1)
    run = make_run(base_model=str(tiny_path), snapshots=False)
    (run / "events.jsonl").touch()
    out = run / "workspace" / "output"
    gen = torch.Generator().manual_seed(0)
    variant(tiny_path, out / "tuned", lambda n, t: t + 1e-3 * torch.randn(
        t.shape, generator=gen, dtype=t.dtype) if "layers.1." in n else t)
    swapped = out / "swapped"
    shutil.copytree(tiny_path, swapped)
    shutil.copy2(weights_file(other), weights_file(swapped))

    service = GraderService(ServiceConfig.load(run))
    service.start()
    service.submit({"model_path": "/workspace/output/tuned"})
    service.submit({"model_path": "/workspace/output/swapped"})
    end = time.monotonic() + 120
    while not service.idle() and time.monotonic() < end:
        time.sleep(0.05)
    service.stop()
    service.join(10)

    journal = [json.loads(x) for x in (run / "submissions.jsonl").read_text().splitlines()]
    flags = {e["id"]: e.get("not_derived") for e in journal if e["op"] == "scored"}
    assert flags == {1: False, 2: True}
    events = {e["data"]["id"]: e["data"].get("not_derived")
              for e in read_events(run / "events.jsonl") if e["type"] == "submission_scored"}
    assert events == flags
    result = json.loads((run / "results" / "2.json").read_text())
    assert result["provenance"]["not_derived"] is True and result["provenance"]["reasons"]
    assert provenance(RunRecord.load(run)).not_derived == ("2",)


# ------------------------------------------------------------------ what the evaluator loads
# provenance.resolve_weight_files mirrors transformers' from_pretrained and vLLM's default
# loader; the check reads exactly those files, every tensor of them (issue 32).
import struct  # noqa: E402

from a2c.runtime.grader_service.weight_files import (  # noqa: E402
    SAFE_INDEX,
    WeightsRefused,
    check_submission_weights,
    read_header,
    resolve_weight_files,
    transformers_files,
    vllm_files,
)


def raw_safetensors(path: Path, entries, header_extra: dict | None = None) -> Path:
    """A safetensors file written byte by byte: entries (name, dtype, shape, data bytes)."""
    header, blobs, offset = dict(header_extra or {}), [], 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return path


def sharded(base: Path, out: Path, split_at: int = 10, change=None) -> Path:
    """`base` saved as two shards and an index (what save_pretrained writes for a big model)."""
    shutil.copytree(base, out)
    tensors = load_file(weights_file(out))
    weights_file(out).unlink()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:split_at],
              "model-00002-of-00002.safetensors": names[split_at:]}
    for shard, keys in shards.items():
        save_file({k: (change(k, tensors[k]) if change else tensors[k]).contiguous()
                   for k in keys}, out / shard, metadata={"format": "pt"})
    (out / SAFE_INDEX).write_text(json.dumps({"metadata": {}, "weight_map": {
        k: shard for shard, keys in shards.items() for k in keys}}))
    return out


def test_layouts_both_loaders_read_alike(tiny_path, tmp_path):
    single = resolve_weight_files(tiny_path)
    assert single.files == ["model.safetensors"] and not single.unread
    two = resolve_weight_files(sharded(tiny_path, tmp_path / "sharded"))
    assert two.files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert two.layout == SAFE_INDEX
    # an index beside model.safetensors that names only it: both read model.safetensors
    both = tmp_path / "both"
    shutil.copytree(tiny_path, both)
    (both / SAFE_INDEX).write_text(json.dumps({"metadata": {}, "weight_map": {
        k: "model.safetensors" for k in load_file(weights_file(tiny_path))}}))
    assert resolve_weight_files(both).files == ["model.safetensors"]


@pytest.mark.parametrize("layout", ["second-file", "index-other-shards", "shard-in-subfolder",
                                    "no-standard-name"])
def test_layouts_the_loaders_read_differently_are_refused(tiny_path, tmp_path, layout):
    """transformers reads model.safetensors first, vLLM every top-level *.safetensors (narrowed
    by the index): where the two would load different files, no verdict could be about 'the'
    state dict, so the folder is refused."""
    out = tmp_path / layout
    if layout == "second-file":
        shutil.copytree(tiny_path, out)
        shutil.copy2(weights_file(out), out / "extra.safetensors")
    elif layout == "index-other-shards":
        sharded(tiny_path, out)
        shutil.copy2(weights_file(tiny_path), out / "model.safetensors")
    elif layout == "shard-in-subfolder":
        sharded(tiny_path, out)
        (out / "sub").mkdir()
        (out / "model-00002-of-00002.safetensors").rename(out / "sub" / "b.safetensors")
        index = json.loads((out / SAFE_INDEX).read_text())
        index["weight_map"] = {k: ("sub/b.safetensors" if v.startswith("model-00002") else v)
                               for k, v in index["weight_map"].items()}
        (out / SAFE_INDEX).write_text(json.dumps(index))
    else:
        shutil.copytree(tiny_path, out)
        weights_file(out).rename(out / "weights.safetensors")
    with pytest.raises(WeightsRefused) as info:
        resolve_weight_files(out)
    assert info.value.code == "unloaded_weights" and "disagree" in info.value.message
    assert "\n" not in info.value.message


def test_transformers_resolution_is_what_transformers_loads(tiny_path, tmp_path):
    """The mirror against the real loader: in each layout the state dict transformers builds is
    the tensors of the files transformers_files names (an extra random file beside an index is
    not read; `transformers_weights` in config.json redirects it)."""
    from transformers import AutoModelForCausalLM

    def loaded(folder):
        model = AutoModelForCausalLM.from_pretrained(folder)
        return {k: v.detach() for k, v in model.state_dict().items()}

    def read(folder):
        out = {}
        for rel in transformers_files(folder)[0]:
            out.update(load_file(folder / rel))
        return out

    gen = torch.Generator().manual_seed(3)
    noise = {k: torch.randn(v.shape, generator=gen) for k, v in
             load_file(weights_file(tiny_path)).items()}
    two = sharded(tiny_path, tmp_path / "two")
    save_file(noise, two / "stray.safetensors")      # vLLM would skip it too (not in the index)
    assert vllm_files(two) == transformers_files(two)[0]
    redirected = tmp_path / "redirected"
    shutil.copytree(tiny_path, redirected)
    save_file(noise, redirected / "other.safetensors")
    cfg = json.loads((redirected / "config.json").read_text())
    (redirected / "config.json").write_text(json.dumps({**cfg, "transformers_weights":
                                                        "other.safetensors"}))
    for folder in (tiny_path, two, redirected):
        state, files = loaded(folder), read(folder)
        for name, tensor in files.items():
            assert torch.equal(state[name], tensor), (folder.name, name)
    assert transformers_files(redirected)[0] == ["other.safetensors"]


@pytest.mark.parametrize("what", ["stray-shard", "checkpoint-subfolder", "gguf", "adapter",
                                  "redirect"])
def test_weight_files_the_loader_does_not_read_are_refused(tiny_path, tmp_path, what):
    out = tmp_path / what
    if what == "stray-shard":
        sharded(tiny_path, out)
        shutil.copy2(weights_file(tiny_path), out / "model-00003-of-00002.safetensors")
    else:
        shutil.copytree(tiny_path, out)
    if what == "checkpoint-subfolder":
        (out / "checkpoint-10").mkdir()
        shutil.copy2(weights_file(out), out / "checkpoint-10" / "model.safetensors")
    elif what == "gguf":
        (out / "model-q8.gguf").write_bytes(b"GGUF" + bytes(60))
    elif what == "adapter":
        (out / "adapter_config.json").write_text('{"base_model_name_or_path": "x"}')
    elif what == "redirect":
        cfg = json.loads((out / "config.json").read_text())
        (out / "config.json").write_text(json.dumps({**cfg,
                                                     "transformers_weights": "model.safetensors"}))
    with pytest.raises(WeightsRefused) as info:
        check_submission_weights(out)
    assert info.value.code == "unloaded_weights", info.value.message
    assert "\n" not in info.value.message


def _entries(base: Path):
    return [(k, "F32", tuple(v.shape), v.numpy().tobytes())
            for k, v in sorted(load_file(weights_file(base)).items())]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "header-past-end", "gap",
                                    "size-mismatch", "not-an-object", "bad-metadata"])
def test_unparsable_files_are_refused_with_one_line(tiny_path, tmp_path, damage):
    path = tmp_path / "model.safetensors"
    entries = _entries(tiny_path)
    if damage == "garbage":
        path.write_bytes(b"this is not a safetensors file at all")
    elif damage == "truncated":
        raw_safetensors(path, entries)
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "header-past-end":
        path.write_bytes(struct.pack("<Q", 1 << 20) + b"{}")
    elif damage == "gap":
        raw_safetensors(path, entries)
        data = bytearray(path.read_bytes())
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        first = min(header, key=lambda k: header[k]["data_offsets"][0])
        header[first]["data_offsets"][0] += 4      # 4 bytes no tensor covers
        header[first]["shape"] = [1]
        header[first]["data_offsets"][1] = header[first]["data_offsets"][0] + 4
        text = json.dumps(header).encode()
        path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data[8 + n:]))
    elif damage == "size-mismatch":
        name, dtype, shape, data = entries[0]
        raw_safetensors(path, [(name, dtype, (shape[0] + 1, *shape[1:]), data), *entries[1:]])
    elif damage == "not-an-object":
        text = b"[1, 2]   "
        path.write_bytes(struct.pack("<Q", len(text)) + text)
    else:
        raw_safetensors(path, entries, {"__metadata__": {"format": 3}})
    with pytest.raises(WeightsRefused) as info:
        read_header(path)
    assert info.value.code == "unreadable_weights" and "model.safetensors" in info.value.message
    assert "\n" not in info.value.message


@pytest.mark.parametrize("dtype", ["F8_E8M0", "F4", "C64", "F8_E4M3FNUZ", "Q4_K"])
def test_a_dtype_the_check_cannot_compare_is_refused(tiny_path, tmp_path, dtype):
    entries = _entries(tiny_path)
    name, _, shape, data = entries[-1]           # model.norm.weight, 64 floats
    size = {"F8_E8M0": 1, "F4": 1, "C64": 8, "F8_E4M3FNUZ": 1, "Q4_K": 1}[dtype]
    count = 1
    for d in shape:
        count *= d
    nbytes = count // 2 if dtype == "F4" else count * size
    path = raw_safetensors(tmp_path / "model.safetensors",
                           [*entries[:-1], (name, dtype, shape, bytes(nbytes))])
    with pytest.raises(WeightsRefused) as info:
        read_header(path)
    assert info.value.code == "unreadable_weights" and name in info.value.message
    assert dtype in info.value.message


def test_fp8_and_bf16_are_read_as_torch_reads_them(tmp_path):
    import numpy as np

    from a2c.runtime.grader_service.provenance import _array
    from a2c.runtime.grader_service.weight_files import TensorRef
    codes = torch.arange(256, dtype=torch.uint8)
    for dtype, torch_dtype in (("F8_E4M3", torch.float8_e4m3fn), ("F8_E5M2", torch.float8_e5m2)):
        path = tmp_path / f"{dtype}.bin"
        path.write_bytes(codes.numpy().tobytes())
        ours = _array(TensorRef(path, dtype, (256,), 0, 256))
        theirs = codes.view(torch_dtype).float().numpy()
        assert np.array_equal(np.isnan(ours), np.isnan(theirs))
        assert np.array_equal(ours[~np.isnan(ours)], theirs[~np.isnan(theirs)])
    values = torch.randn(1000, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    path = tmp_path / "bf16.bin"
    path.write_bytes(values.view(torch.uint16).numpy().tobytes())
    assert np.array_equal(_array(TensorRef(path, "BF16", (1000,), 0, 2000)),
                          values.float().numpy())


def test_every_shard_is_read(tiny_path, tmp_path):
    """A change in the second shard only is seen: the check reads all the loader loads."""
    gen = torch.Generator().manual_seed(0)
    out = sharded(tiny_path, tmp_path / "two", change=lambda k, t: (
        t.float().std() * torch.randn(t.shape, generator=gen)) if "layers.1.mlp" in k else t)
    prov = check_provenance(out, tiny_path)
    assert prov.weights["files"] == ["model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors"]
    assert prov.not_derived is True and prov.weights["max_tensor"].startswith(
        "model.layers.1.mlp")


def test_shrink_measures_the_blend_weight(tiny_path, tmp_path):
    """(1 − a)·base + a·foreign with an independent foreign shrinks each group by about a."""
    gen = torch.Generator().manual_seed(0)
    for a in (0.02, 0.2):
        sub = variant(tiny_path, tmp_path / f"blend-{a}", lambda n, t, a=a: (
            (1 - a) * t + a * t.std() * torch.randn(t.shape, generator=gen)) if t.dim() > 1 else t)
        w = check_provenance(sub, tiny_path).weights
        assert abs(w["shrink"]["layers.000"] - a) < 0.2 * a + 0.005, w["shrink"]


def test_nan_weights_are_not_derived(tiny_path, tmp_path):
    def poison(name, t):
        if "embed" in name:
            t = t.clone()
            t[-1, 0] = float("nan")
        return t
    prov = check_provenance(variant(tiny_path, tmp_path / "nan", poison), tiny_path)
    assert prov.not_derived is True and "NaN" in prov.reasons[0]


def test_a_check_that_cannot_run_does_not_score_the_submission(tiny_path, make_run,
                                                               monkeypatch):
    """Never scored unchecked: the provenance check raising (the grader's own failure, since
    intake refused what it cannot read) makes the submission invalid, not valid with null."""
    import time

    from a2c.contracts.service_config import ServiceConfig
    from a2c.runtime.grader_service import core, provenance

    def broken(*args, **kwargs):
        raise OSError("disk read error")

    monkeypatch.setattr(provenance, "check_provenance", broken)
    run = make_run(base_model=str(tiny_path), snapshots=False)
    (run / "events.jsonl").touch()
    shutil.copytree(tiny_path, run / "workspace" / "output" / "m")
    service = core.GraderService(ServiceConfig.load(run))
    service.start()
    sid = service.submit({"model_path": "/workspace/output/m"})["id"]
    end = time.monotonic() + 60
    while not service.idle() and time.monotonic() < end:
        time.sleep(0.05)
    service.stop()
    service.join(10)
    sub = service.get(sid)
    assert sub["valid"] is False and sub["score"] is None and sub["code"] == "internal_error"
    assert "provenance check could not run" in sub["error"] and sub.get("not_derived") is None


def test_one_matrix_past_its_threshold_is_flagged_when_its_group_is_not():
    """A small matrix replaced hides in its group's sum; the per-matrix change gives it away."""
    from a2c.contracts.provenance import WeightChange
    from a2c.runtime.grader_service.provenance import (
        NOT_DERIVED_MATRIX_CHANGE,
        NOT_DERIVED_REL_CHANGE,
        NOT_DERIVED_SHRINK,
        _verdict,
    )
    weights = WeightChange(relative_change={"layers.000": NOT_DERIVED_REL_CHANGE / 2},
                           max_relative_change=NOT_DERIVED_REL_CHANGE / 2, max_group="layers.000",
                           max_tensor_change=1.4,
                           max_tensor="model.layers.0.self_attn.k_proj.weight",
                           shrink={"layers.000": 0.0}, max_shrink=0.0, nonfinite=[])
    reasons = _verdict(weights, NOT_DERIVED_REL_CHANGE, NOT_DERIVED_SHRINK)
    assert len(reasons) == 1 and "k_proj" in reasons[0]
    assert str(NOT_DERIVED_MATRIX_CHANGE) in reasons[0]
    weights.max_tensor_change = NOT_DERIVED_MATRIX_CHANGE / 2
    assert _verdict(weights, NOT_DERIVED_REL_CHANGE, NOT_DERIVED_SHRINK) == []


def test_a_head_left_to_random_initialisation_is_not_derived(tiny_path, tmp_path):
    """The base ties its head to the embeddings and stores none: a submission that stores none
    but unties it in config.json is loaded with a random head (a missing tensor)."""
    out = tmp_path / "untied-no-head"
    shutil.copytree(tiny_path, out)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["tie_word_embeddings"] is True
    (out / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": False}))
    prov = check_provenance(out, tiny_path)
    assert prov.not_derived is True and "random" in prov.reasons[-1]
