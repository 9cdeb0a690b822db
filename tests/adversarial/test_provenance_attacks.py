"""Hostile submissions against the provenance check (issue 23, point 4): each test repeats a route
that once passed and asserts it fails now.

- random-initialised weights submitted as `pytorch_model.bin` were scored unchecked: a pickle
  format is now refused at submit, with a clear error the agent reads in its /submit answer;
- the base with its embedding matrix replaced passed (one layer group of four moved; the rule took
  the median): any layer group moving past the threshold flags the submission now;
- and the honest routes stay unflagged: the base itself, a small fine-tune-like change, the base
  saved again by the agent's own transformers (tokenizer.json written by another release), a
  head untied from its embedding.
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
    check_provenance,
)


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
    copy_submission(src, src.parent, tmp_path / "copy", shown=str(src), limit=str(src.parent),
                    max_bytes=1 << 30, max_files=1000)


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
    assert prov["not_derived"] is True, prov
    assert prov["weights"]["max_relative_change"] > 1


def test_base_with_only_its_embedding_randomised_is_flagged(base, tmp_path):
    """One layer group of four moved: the median stays 0, the largest group gives it away."""
    sub = variant(base, tmp_path / "embed",
                  lambda k, v, g: rand_like(v, g) if "embed" in k else v)
    prov = check_provenance(sub, base)
    w = prov["weights"]
    assert w["median_relative_change"] == 0          # what the old rule read: it passed
    assert prov["not_derived"] is True and w["max_group"] == "embed", prov
    assert any("embed" in r for r in prov["reasons"])


def test_one_layer_replaced_is_flagged(base, tmp_path):
    sub = variant(base, tmp_path / "layer",
                  lambda k, v, g: rand_like(v, g) if ".layers.1." in k and v.dim() > 1 else v)
    prov = check_provenance(sub, base)
    assert prov["not_derived"] is True and prov["weights"]["max_group"] == "layers.001"


def test_unchanged_base_is_not_flagged(base):
    prov = check_provenance(base, base)
    assert prov["not_derived"] is False and prov["weights"]["max_relative_change"] == 0


def test_fine_tune_like_change_on_every_group_is_not_flagged(base, tmp_path):
    """Every tensor moved by 5 % of its scale (past the largest real fine-tune measured)."""
    sub = variant(base, tmp_path / "tuned", lambda k, v, g: v + 0.05 * v.float().std() *
                  torch.randn(v.shape, generator=g).to(v.dtype) if v.dim() > 1 else v)
    prov = check_provenance(sub, base)
    assert prov["not_derived"] is False, prov
    assert 0 < prov["weights"]["max_relative_change"] < NOT_DERIVED_REL_CHANGE


def test_base_saved_again_by_the_agent_is_derived(base, tmp_path):
    """save_pretrained with the installed transformers/tokenizers rewrites tokenizer.json
    (`continuing_subword_prefix` "" for null): still the base's vocabulary."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model.save_pretrained(tmp_path / "saved", safe_serialization=True)
    tokenizer.save_pretrained(tmp_path / "saved")
    prov = check_provenance(tmp_path / "saved", base)
    assert prov["same_tokenizer"] is True and prov["not_derived"] is False, prov


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
    assert prov["not_derived"] is False, prov
    assert prov["weights"]["tied_head"] == ["lm_head.weight"]
    assert prov["weights"]["relative_change"]["head"] == 0


def test_untied_random_head_is_flagged(base, tmp_path):
    gen = torch.Generator().manual_seed(1)
    prov = check_provenance(_untie(base, tmp_path / "head", lambda e: rand_like(e, gen)), base)
    assert prov["not_derived"] is True and prov["weights"]["max_group"] == "head", prov
