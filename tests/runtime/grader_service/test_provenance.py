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
    assert prov["not_derived"] is False, prov
    assert prov["same_architecture"] and prov["same_tokenizer"]
    w = prov["weights"]
    assert 0 < w["changed_fraction"] < 1
    assert w["relative_change"]["layers.000"] > 0 and w["relative_change"]["embed"] == 0
    assert check_provenance(tiny_path, tiny_path)["weights"]["changed_fraction"] == 0


def test_another_models_weights_are_not_derived(tiny_path, tmp_path, monkeypatch):
    """The tiny model built from another seed: its own tokenizer and weights."""
    from a2c.runtime.models import prepare_builtin
    monkeypatch.setenv("A2C_CACHE", str(tiny_path.parents[1]))
    other = prepare_builtin("tiny", seed=1)
    prov = check_provenance(other, tiny_path)
    assert prov["not_derived"] is True, prov
    # the same with the base's tokenizer: only the weights give it away
    swapped = tmp_path / "swapped"
    shutil.copytree(tiny_path, swapped)
    shutil.copy2(weights_file(other), weights_file(swapped))
    prov = check_provenance(swapped, tiny_path)
    assert prov["same_tokenizer"] is True and prov["not_derived"] is True
    assert prov["weights"]["median_relative_change"] > 0.5
    assert any("moved" in r for r in prov["reasons"])


def test_reinitialised_model_is_not_derived(tiny_path, tmp_path):
    gen = torch.Generator().manual_seed(7)

    def reinit(name, t):   # a fresh init; layer norms kept at their ones
        if t.dim() < 2:
            return t
        return 0.02 * torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.dtype)

    prov = check_provenance(variant(tiny_path, tmp_path / "reinit", reinit), tiny_path)
    assert prov["not_derived"] is True, prov


def test_other_architecture_is_not_derived(tiny_path, tmp_path):
    other = tmp_path / "wider"
    shutil.copytree(tiny_path, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["num_hidden_layers"] = cfg["num_hidden_layers"] + 1
    (other / "config.json").write_text(json.dumps(cfg))
    prov = check_provenance(other, tiny_path)
    assert prov["not_derived"] is True and prov["same_architecture"] is False


def test_bf16_submission_of_the_base_is_derived(tiny_path, tmp_path):
    """Saved in bf16 (what many trainers write): rounding, not a move away from the base."""
    half = variant(tiny_path, tmp_path / "bf16",
                   lambda n, t: t.to(torch.bfloat16) if t.dtype.is_floating_point else t)
    prov = check_provenance(half, tiny_path)
    assert prov["not_derived"] is False
    assert prov["weights"]["median_relative_change"] < 0.01


def test_service_flags_a_submission_with_another_models_weights(tiny_path, tmp_path, make_run,
                                                                monkeypatch):
    """Submitted through the grader: the record (journal, event, results file) and the report's
    provenance section name the swapped model, not the fine-tuned one."""
    import time

    from a2c.analysis.record import RunRecord
    from a2c.analysis.trust import provenance
    from a2c.contracts.events import read_events
    from a2c.contracts.service_config import ServiceConfig
    from a2c.runtime.grader_service.core import GradingService
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

    service = GradingService(ServiceConfig.load(run))
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
    assert provenance(RunRecord.load(run))["not_derived"] == ["2"]
