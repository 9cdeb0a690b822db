"""Hostile submissions against the provenance check (issue 23, point 4): each test repeats a route
that once passed and asserts it fails now.

- random-initialised weights submitted as `pytorch_model.bin` were scored unchecked: a pickle
  format is now refused at submit, with a clear error the agent reads in its /submit answer;
- the base with its embedding matrix replaced passed (one layer group of four moved; the rule took
  the median): any layer group moving past the threshold flags the submission now;
- and the honest routes stay unflagged: the base itself, a small fine-tune-like change, the base
  saved again by the agent's own transformers (tokenizer.json written by another release), a
  head untied from its embedding.

Issue 32 (class 1, "Weights"): random initialisations of the base architecture were reported
derived
- when the folder also held a weight file the evaluator does not load (the check read that one):
  refused at submit now (`unloaded_weights`), and the check reads what the loader reads;
- when one shard could not be parsed (architecture and tokenizer sufficed): refused at submit
  (`unreadable_weights`), and the check raises rather than answer without the weights;
- when one tensor had an unusual dtype (the check raised, 'unchecked' was recorded and the
  submission scored): refused at submit with one line naming the tensor and its dtype;
- when base and foreign weights were blended so every tensor moved under the threshold: the
  shrink along the base flags a blend from a = NOT_DERIVED_SHRINK, the relative change (now
  0.25) a rescaled blend from where it moves a group past it; real short fine-tunes stay derived.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from unittest import mock

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import load_file, save_file  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime" / "grader_service"))

from service_helpers import RunFactory  # noqa: E402

from a2c.runtime.grader_service import GraderClientError  # noqa: E402
from a2c.runtime.grader_service import start_grader_service as start_service  # noqa: E402
from a2c.runtime.grader_service.common import Refusal  # noqa: E402
from a2c.runtime.grader_service.intake import copy_submission  # noqa: E402
from a2c.runtime.grader_service.provenance import (  # noqa: E402
    NOT_DERIVED_REL_CHANGE,
    NOT_DERIVED_SHRINK,
    check_provenance,
)
from a2c.runtime.grader_service.weight_files import WeightsRefused  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The built-in tiny model (108k parameters, tied embeddings), in a cache of its own."""
    from a2c.runtime.models import prepare_builtin
    root = tmp_path_factory.mktemp("cache")
    with mock.patch.dict("os.environ", {"A2C_CACHE": str(root)}):
        return prepare_builtin("tiny")


def weights(folder: Path) -> Path:
    (path,) = sorted(folder.glob("*.safetensors"))
    return path


def variant(base: Path, out: Path, change) -> Path:
    shutil.copytree(base, out)
    path = weights(out)
    gen = torch.Generator().manual_seed(0)
    tensors = load_file(path)
    save_file({k: change(k, v, gen).contiguous() for k, v in tensors.items()}, path,
              metadata={"format": "pt"})
    return out


def rand_like(t, gen):
    return (t.float().std() * torch.randn(t.shape, generator=gen)).to(t.dtype)


def random_init(name, t, gen):
    return rand_like(t, gen) if t.dim() > 1 else t


def intake(src: Path, tmp_path: Path) -> None:
    """The grader's intake as a service with a base model runs it (`check_weights`)."""
    copy = tmp_path / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    copy_submission(src, src.parent, copy, shown=str(src), limit=str(src.parent),
                    max_bytes=1 << 30, max_files=1000, check_weights=True)


# ------------------------------------------------------------------ pickle formats
def test_random_init_as_pytorch_model_bin_is_refused_at_intake(base, tmp_path):
    """The red team's route: random weights as pytorch_model.bin, no safetensors at all."""
    out = tmp_path / "output" / "random-bin"
    out.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if (base / name).is_file():
            shutil.copy2(base / name, out / name)
    gen = torch.Generator().manual_seed(0)
    torch.save({k: random_init(k, v, gen) for k, v in load_file(weights(base)).items()},
               out / "pytorch_model.bin")
    with pytest.raises(Refusal) as info:
        intake(out, tmp_path)
    err = info.value
    assert err.code == "pickle_weights" and err.status == 400
    assert "pytorch_model.bin" in err.message and "safetensors" in err.message
    assert "save_pretrained" in err.message
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("name", ["optimizer.pt", "sub/rng_state.pth", "model.ckpt",
                                  "weights.pkl", "training_args.bin", "MODEL.BIN"])
def test_any_pickle_file_next_to_safetensors_is_refused(base, tmp_path, name):
    """Safetensors beside a pickle: transformers may still load the pickle; refused too."""
    out = tmp_path / "output" / "mixed"
    shutil.copytree(base, out)
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(Refusal) as info:
        intake(out, tmp_path)
    assert info.value.code == "pickle_weights" and Path(name).name in info.value.message


def test_the_agent_reads_the_refusal_in_its_submit_answer(base, tmp_path):
    run = RunFactory(tmp_path)()
    out = run / "workspace" / "output" / "bin"
    shutil.copytree(base, out)
    weights(out).unlink()
    torch.save(load_file(weights(base)), out / "pytorch_model.bin")
    handle = start_service(run, timeout_s=30)
    try:
        with pytest.raises(GraderClientError) as info:
            handle.client().submit("output/bin")
        body = info.value.body
        assert info.value.status == 400 and body["error"] == "pickle_weights", body
        assert "safetensors" in body["message"]
        assert handle.client().time()["submissions_left"] == 50   # nothing was used up
    finally:
        handle.kill()
        handle.proc.wait(10)


# ------------------------------------------------------------------ weights, every group
def test_random_init_as_safetensors_is_not_derived(base, tmp_path):
    prov = check_provenance(variant(base, tmp_path / "rand", random_init), base)
    assert prov.not_derived is True, prov
    assert prov.weights["max_relative_change"] > 1


def test_base_with_only_its_embedding_randomised_is_flagged(base, tmp_path):
    """One layer group of four moved: the median stays 0, the largest group gives it away."""
    sub = variant(base, tmp_path / "embed",
                  lambda k, v, g: rand_like(v, g) if "embed" in k else v)
    prov = check_provenance(sub, base)
    w = prov.weights
    assert w["median_relative_change"] == 0          # what the old rule read: it passed
    assert prov.not_derived is True and w["max_group"] == "embed", prov
    assert any("embed" in r for r in prov.reasons)


def test_one_layer_replaced_is_flagged(base, tmp_path):
    sub = variant(base, tmp_path / "layer",
                  lambda k, v, g: rand_like(v, g) if ".layers.1." in k and v.dim() > 1 else v)
    prov = check_provenance(sub, base)
    assert prov.not_derived is True and prov.weights["max_group"] == "layers.001"


def test_unchanged_base_is_not_flagged(base):
    prov = check_provenance(base, base)
    assert prov.not_derived is False and prov.weights["max_relative_change"] == 0


def test_fine_tune_like_change_on_every_group_is_not_flagged(base, tmp_path):
    """Every tensor moved by 5 % of its scale (past the largest real fine-tune measured)."""
    sub = variant(base, tmp_path / "tuned", lambda k, v, g: v + 0.05 * v.float().std() *
                  torch.randn(v.shape, generator=g).to(v.dtype) if v.dim() > 1 else v)
    prov = check_provenance(sub, base)
    assert prov.not_derived is False, prov
    assert 0 < prov.weights["max_relative_change"] < NOT_DERIVED_REL_CHANGE


def test_base_saved_again_by_the_agent_is_derived(base, tmp_path):
    """save_pretrained with the installed transformers/tokenizers rewrites tokenizer.json
    (`continuing_subword_prefix` "" for null): still the base's vocabulary."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model.save_pretrained(tmp_path / "saved", safe_serialization=True)
    tokenizer.save_pretrained(tmp_path / "saved")
    prov = check_provenance(tmp_path / "saved", base)
    assert prov.same_tokenizer is True and prov.not_derived is False, prov


# ------------------------------------------------------------------ tied embeddings
def _untie(base: Path, out: Path, head) -> Path:
    """The submission stores an lm_head.weight the tied base does not."""
    shutil.copytree(base, out)
    path = weights(out)
    tensors = load_file(path)
    (embed,) = [k for k in tensors if "embed_tokens" in k]
    tensors["lm_head.weight"] = head(tensors[embed]).contiguous()
    save_file(tensors, path, metadata={"format": "pt"})
    return out


def test_untied_head_equal_to_the_embedding_is_derived(base, tmp_path):
    assert not any("lm_head" in k for k in load_file(weights(base)))   # the base ties them
    prov = check_provenance(_untie(base, tmp_path / "untied", lambda e: e.clone()), base)
    assert prov.not_derived is False, prov
    assert prov.weights["tied_head"] == ["lm_head.weight"]
    assert prov.weights["relative_change"]["head"] == 0


def test_untied_random_head_is_flagged(base, tmp_path):
    gen = torch.Generator().manual_seed(1)
    prov = check_provenance(_untie(base, tmp_path / "head", lambda e: rand_like(e, gen)), base)
    assert prov.not_derived is True and prov.weights["max_group"] == "head", prov


# ------------------------------------------------------------------ issue 32: what is loaded
def _random_model(base: Path, out: Path) -> Path:
    return variant(base, out, random_init)


def test_random_init_beside_an_unloaded_base_copy_is_refused(base, tmp_path):
    """The red team's folder: model.safetensors (what the evaluator loads) random, the base's
    weights as original.safetensors (what the old check read: it globbed every file and the
    later name won)."""
    out = _random_model(base, tmp_path / "output" / "decoy")
    shutil.copy2(weights(base), out / "original.safetensors")
    with pytest.raises(Refusal) as info:
        intake(out, tmp_path)
    assert info.value.code == "unloaded_weights" and info.value.status == 400
    assert "original.safetensors" in info.value.message and "\n" not in info.value.message
    assert not (tmp_path / "copy").exists()
    # the check itself, called on the folder, compares what the loader loads: the random one
    (out / "original.safetensors").rename(out / "decoy.txt")
    prov = check_provenance(out, base)
    assert prov.weights["files"] == ["model.safetensors"] and prov.not_derived is True


@pytest.mark.parametrize("decoy", ["checkpoint-500/model.safetensors", "zz.safetensors",
                                   "model-00009-of-00009.safetensors"])
def test_any_weight_file_the_loader_skips_is_refused(base, tmp_path, decoy):
    out = _random_model(base, tmp_path / "output" / "m")
    (out / decoy).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(weights(base), out / decoy)
    with pytest.raises(Refusal) as info:
        intake(out, tmp_path)
    assert info.value.code == "unloaded_weights"


def _shards(base: Path, out: Path, tensors: dict) -> Path:
    names = sorted(tensors)
    half = {"model-00001-of-00002.safetensors": names[:13],
            "model-00002-of-00002.safetensors": names[13:]}
    for shard, keys in half.items():
        save_file({k: tensors[k].contiguous() for k in keys}, out / shard,
                  metadata={"format": "pt"})
    import json
    (out / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: s for s, keys in half.items() for k in keys}}))
    return out


def test_random_init_with_an_unparsable_shard_is_refused(base, tmp_path):
    """Architecture and tokenizer are the base's; one shard does not parse: the old reader gave
    up on the weights and the config sufficed for 'derived'."""
    out = tmp_path / "output" / "sharded"
    shutil.copytree(base, out)
    weights(out).unlink()
    gen = torch.Generator().manual_seed(0)
    _shards(base, out, {k: random_init(k, v, gen) for k, v in load_file(weights(base)).items()})
    shard = out / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:8] + b"{not json" + shard.read_bytes()[17:])
    with pytest.raises(Refusal) as info:
        intake(out, tmp_path)
    assert info.value.code == "unreadable_weights"
    assert "model-00002-of-00002.safetensors" in info.value.message
    with pytest.raises(WeightsRefused):           # never an answer without the weights
        check_provenance(out, base)


def test_a_tensor_in_an_odd_dtype_is_refused_not_unchecked(base, tmp_path):
    """One tensor as F8_E8M0 (a scale format numpy has no type for): the old check raised, the
    service recorded not_derived null and scored the submission."""
    import json
    import struct
    out = tmp_path / "output" / "odd"
    shutil.copytree(base, out)
    tensors = load_file(weights(base))
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = random_init(name, tensors[name], torch.Generator().manual_seed(0))
        dtype, data = "F32", t.numpy().tobytes()
        if name == "model.norm.weight":
            dtype, data = "F8_E8M0", bytes(t.numel())
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    weights(out).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    with pytest.raises(Refusal) as info:
        intake(out, tmp_path)
    assert info.value.code == "unreadable_weights"
    assert "model.norm.weight" in info.value.message and "F8_E8M0" in info.value.message
    with pytest.raises(WeightsRefused):
        check_provenance(out, base)


def test_the_agent_reads_a_weights_refusal_in_its_submit_answer(base, tmp_path):
    """Through the service with a base model: the refusal is the /submit answer, one line, and
    no submission is used up."""
    run = RunFactory(tmp_path)(base_model=str(base))
    out = run / "workspace" / "output" / "decoy"
    _random_model(base, out)
    shutil.copy2(weights(base), out / "original.safetensors")
    handle = start_service(run, timeout_s=30)
    try:
        with pytest.raises(GraderClientError) as info:
            handle.client().submit("output/decoy")
        body = info.value.body
        assert info.value.status == 400 and body["error"] == "unloaded_weights", body
        assert "original.safetensors" in body["message"] and "\n" not in body["message"]
        assert handle.client().time()["submissions_left"] == 50
    finally:
        handle.kill()
        handle.proc.wait(10)


# ------------------------------------------------------------------ issue 32: blends
def _init_like(base: Path) -> dict:
    """A random initialisation of the base's architecture (transformers' own from_config)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(base))
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _blend(base: Path, out: Path, foreign: dict, a: float, rescale: bool = False) -> Path:
    def mix(name, t, gen):
        w = (1 - a) * t + a * foreign[name].to(t.dtype)
        if rescale and bool(t.any()):     # the shrink undone: w's projection on t is t
            w = w * (t.double().pow(2).sum() / (w.double() * t.double()).sum()).float()
        return w
    return variant(base, out, mix)


@pytest.mark.parametrize("a", [0.1, 0.2, 0.35, 0.5])
def test_blends_with_a_random_initialisation_are_not_derived(base, tmp_path, a):
    """From a = 0.1 (twice NOT_DERIVED_SHRINK): every group shrinks along the base by ~a. At
    0.35 every group had moved under the old 0.5 threshold."""
    prov = check_provenance(_blend(base, tmp_path / "b", _init_like(base), a), base)
    assert prov.not_derived is True, prov.weights
    assert prov.weights["max_shrink"] > NOT_DERIVED_SHRINK
    assert any("shrank" in r for r in prov.reasons)


@pytest.mark.parametrize("a", [0.1, 0.35])
def test_blends_with_random_values_at_the_base_scale_are_not_derived(base, tmp_path, a):
    gen = torch.Generator().manual_seed(2)
    foreign = {k: rand_like(v, gen) if v.dim() > 1 else v
               for k, v in load_file(weights(base)).items()}
    prov = check_provenance(_blend(base, tmp_path / "b", foreign, a), base)
    assert prov.not_derived is True and prov.weights["max_shrink"] > NOT_DERIVED_SHRINK


def test_a_rescaled_blend_is_flagged_once_it_moves_past_the_threshold(base, tmp_path):
    """The shrink undone tensor by tensor: only the relative change is left to see it; at
    a = 0.3 with values at the base's scale each group moves by ~0.43."""
    gen = torch.Generator().manual_seed(2)
    foreign = {k: rand_like(v, gen) if v.dim() > 1 else v
               for k, v in load_file(weights(base)).items()}
    prov = check_provenance(_blend(base, tmp_path / "b", foreign, 0.3, rescale=True), base)
    w = prov.weights
    assert abs(w["max_shrink"]) < NOT_DERIVED_SHRINK            # the shrink is gone ...
    assert prov.not_derived is True and w["max_relative_change"] > NOT_DERIVED_REL_CHANGE


def test_below_the_documented_level_a_rescaled_blend_is_derived(base, tmp_path):
    """What the check cannot prove (docs/grader-service.md): a rescaled blend moving every group
    by under NOT_DERIVED_REL_CHANGE is base plus a perturbation no larger than a fine-tune's
    allowance; pinned so that a change here is a change to the documented limit."""
    gen = torch.Generator().manual_seed(2)
    foreign = {k: rand_like(v, gen) if v.dim() > 1 else v
               for k, v in load_file(weights(base)).items()}
    prov = check_provenance(_blend(base, tmp_path / "b", foreign, 0.05, rescale=True), base)
    assert prov.not_derived is False
    assert prov.weights["max_relative_change"] < NOT_DERIVED_REL_CHANGE


# ------------------------------------------------------------------ issue 32: honest routes
def _sft(base: Path, out: Path, lr: float, steps: int, weight_decay: float = 0.0) -> Path:
    """A real short SFT of the tiny base (AdamW, arithmetic lines), saved by save_pretrained."""
    import random

    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(base)
    net = AutoModelForCausalLM.from_pretrained(base)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    rng = random.Random(0)
    for _ in range(steps):
        pairs = [(rng.randint(0, 99), rng.randint(0, 99)) for _ in range(8)]
        batch = tok([f"{x} + {y} = {x + y}\n#### {x + y}" for x, y in pairs],
                    return_tensors="pt", padding=True)
        net(**batch, labels=batch["input_ids"]).loss.backward()
        opt.step()
        opt.zero_grad()
    net.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.mark.parametrize("lr,steps,decay", [(5e-5, 50, 0.0), (1e-3, 30, 0.0), (1e-3, 30, 0.01)])
def test_real_short_fine_tunes_are_derived(base, tmp_path, lr, steps, decay):
    """The tiny base trained for real (its weights are an untrained initialisation, so it moves
    further than a trained model: lr 1e-3 x 30 steps moves its embeddings by ~0.1)."""
    tuned = _sft(base, tmp_path / "sft", lr, steps, decay)
    intake(tuned, tmp_path)                               # accepted as saved
    prov = check_provenance(tuned, base)
    assert prov.not_derived is False, prov.reasons
    assert 0 < prov.weights["max_relative_change"] < NOT_DERIVED_REL_CHANGE


def test_fp8_copy_of_the_base_is_read_and_derived(base, tmp_path):
    """Stored as float8 (E4M3): read through its table, compared, rounding only."""
    sub = variant(base, tmp_path / "fp8", lambda k, v, g: v.to(torch.float8_e4m3fn)
                  if v.dim() > 1 else v)
    intake(sub, tmp_path)
    prov = check_provenance(sub, base)
    assert prov.not_derived is False and 0 < prov.weights["max_relative_change"] < 0.1
