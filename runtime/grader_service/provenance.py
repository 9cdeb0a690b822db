"""Provenance of a submitted model: is it derived from the base model the task gives the agent?

Why: the benchmark measures what an agent's post-training did to *this* base model. A submission
with another model's weights (a bigger model it found, a model trained elsewhere) or a
re-initialised model scores something else, and a copy of the base is caught by its hash already
(weights.py). So each valid submission is compared with the base:

- **architecture**: `config.json`'s `architectures`, `model_type` and the keys that fix the
  tensors' shapes (hidden size, layers, heads, vocabulary) are the base's;
- **tokenizer**: the vocabulary (`tokenizer.json`'s `model` section, else `vocab.json` /
  `merges.txt` / `tokenizer.model`) is the base's; missing tokenizer files are "unknown", not a
  mismatch (the evaluation fails on its own if it needs them);
- **weights**: the same tensor names and shapes; for each tensor whether it changed at all and the
  relative norm of the change, ‖w − w_base‖ / ‖w_base‖, summed per layer group (the embeddings,
  each `layers.<i>`, the output head, the rest). Tied embeddings: a side that stores no
  `lm_head.weight` uses its embedding matrix as the head, so a submission that unties (or ties)
  its head is compared head against head, not flagged for a missing tensor.

Fine-tuning moves every layer group by a small fraction of its norm: measured on real SFT and GRPO
submissions of the reference agents from SmolLM2-135M-Instruct, at most MEASURED_MAX_FT (numbers
in docs/grader-service.md, `benchmarks/bench_provenance.py --calibrate`); a weight matrix
replaced by independent values moves by at least 1 (‖r − b‖² = ‖r‖² + ‖b‖² when r and b are
unrelated), a fresh initialisation by about √2. A submission is **not derived** when its
architecture or tokenizer differs, its tensors differ in name or shape, or ANY layer group (the
embeddings and the head included) moved by more than `NOT_DERIVED_REL_CHANGE`: replacing a single
group (the red team's random embedding matrix) is caught, where a median over groups let it by.

Safetensors only: the grader refuses a submission holding pickle-format files at submit
(intake.py, `pickle_weights`), so every weight it evaluates is read here. Cheap by construction:
safetensors files are read through a memory map with numpy (bf16 widened by a bit shift), one
tensor at a time, in float64 sums; no torch. benchmarks/bench_provenance.py prints the time as a
ratio of one evaluation.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from a2c.canonical import canonical_json

NOT_DERIVED_REL_CHANGE = 0.5
MEASURED_MAX_FT = 0.0122  # the largest per-group change of a real fine-tune (docs/grader-service.md)
MAX_HEADER = 100 << 20   # safetensors' own limit on the JSON header
SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
              "intermediate_size", "vocab_size", "n_embd", "n_layer", "n_head", "d_model")
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer.model", "vocab.txt")
DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
HEAD = re.compile(r"(?:^|\.)(?:lm_head|embed_out|output)\.weight$")
LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")


def _config(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def architecture(folder: Path) -> dict[str, Any] | None:
    """What fixes the model's shape, from its config.json (None when it has none)."""
    cfg = _config(folder)
    if not isinstance(cfg, dict):
        return None
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    return {"architectures": cfg.get("architectures"), "model_type": cfg.get("model_type"),
            **{k: cfg.get(k, text.get(k)) for k in SHAPE_KEYS if k in cfg or k in text}}


def _vocabulary(model: Any) -> dict[str, Any]:
    """What a tokenizer.json `model` section maps text to ids by: its type, vocabulary and merges
    (a merge written "a b" or ["a", "b"] alike). Options a tokenizers release writes differently
    for the same tokenizer (`continuing_subword_prefix` null or "") do not count: a base
    tokenizer saved again by the agent's own library version is still the base's."""
    merges = model.get("merges")
    if isinstance(merges, list):
        merges = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in merges]
    return {"type": model.get("type"), "vocab": model.get("vocab"), "merges": merges}


def tokenizer_identity(folder: Path) -> str | None:
    """sha256 of the vocabulary (and merges) the tokenizer files define; None without any."""
    tok = folder / "tokenizer.json"
    if tok.is_file():
        try:
            data = json.loads(tok.read_text(encoding="utf-8"))
            added = data.get("added_tokens")
            return hashlib.sha256(canonical_json({"model": _vocabulary(data.get("model") or {}),
                                                  "added": [(a.get("id"), a.get("content"))
                                                            for a in added or []]})).hexdigest()
        except (OSError, ValueError, AttributeError):
            pass
    digest, found = hashlib.sha256(), False
    for name in TOKENIZER_FILES:
        path = folder / name
        if path.is_file():
            found = True
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest() if found else None


def _header(path: Path) -> tuple[dict[str, Any], int]:
    with open(path, "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        if size > min(MAX_HEADER, path.stat().st_size - 8):
            raise ValueError(f"{path.name}: not a safetensors file")
        header = json.loads(handle.read(size))
    if not isinstance(header, dict):
        raise ValueError(f"{path.name}: not a safetensors file")
    header.pop("__metadata__", None)
    return header, 8 + size


def tensor_index(folder: Path) -> dict[str, tuple[Path, dict[str, Any], int]] | None:
    """{tensor name: (file, header entry, data start)} over the folder's safetensors shards;
    None when there are none or one does not parse."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    index: dict[str, tuple[Path, dict[str, Any], int]] = {}
    try:
        for path in files:
            header, start = _header(path)
            for name, entry in header.items():
                index[name] = (path, entry, start)
    except (OSError, ValueError):
        return None
    return index


def _array(path: Path, entry: dict[str, Any], start: int) -> np.ndarray:
    """One tensor as a flat float32/float64 array, read through a memory map."""
    lo, hi = entry["data_offsets"]
    dtype = entry["dtype"]
    if dtype == "BF16":
        raw = np.memmap(path, dtype=np.uint16, mode="r", offset=start + lo,
                        shape=((hi - lo) // 2,))
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype} is not supported")
    item = np.dtype(DTYPES[dtype]).itemsize
    raw = np.memmap(path, dtype=DTYPES[dtype], mode="r", offset=start + lo,
                    shape=((hi - lo) // item,))
    return raw.astype(np.float32) if dtype in ("F16", "F32") else raw.astype(np.float64)


def layer_group(name: str) -> str:
    """The layer group a tensor belongs to: `layers.<i>`, `embed`, `head` (the output
    projection), or `other` (final norms and the rest)."""
    match = LAYER.search(name)
    if match:
        return f"layers.{int(match.group(1)):03d}"
    if "embed" in name or name.endswith("wte.weight"):
        return "embed"
    return "head" if HEAD.search(name) else "other"


def _embedding_name(index: dict[str, Any]) -> str | None:
    names = [n for n in index if layer_group(n) == "embed" and n.endswith("weight")
             and ("embed_tokens" in n or n.endswith("wte.weight") or "word_embeddings" in n)]
    return sorted(names)[0] if len(names) == 1 else None


def _tie_heads(sub: dict[str, Any], base: dict[str, Any]) -> list[str]:
    """Tied embeddings: a head tensor one side stores and the other does not is, on the other
    side, that side's embedding matrix (what `tie_word_embeddings` makes it). Adds the alias
    in place; returns the names aliased."""
    aliased = []
    for name in sorted(set(sub) ^ set(base)):
        if layer_group(name) != "head":
            continue
        lacking = base if name in sub else sub
        embed = _embedding_name(lacking)
        if embed is not None:
            lacking[name] = lacking[embed]
            aliased.append(name)
    return aliased


def weight_change(submission: Path, base: Path) -> dict[str, Any]:
    """Tensor by tensor: names and shapes compared, the fraction of tensors that changed, and
    the relative norm of the change per layer group (its largest and median too)."""
    sub_index, base_index = tensor_index(submission), tensor_index(base)
    if sub_index is None or base_index is None:
        return {"checked": False, "reason": "no readable safetensors weights to compare"}
    tied = _tie_heads(sub_index, base_index)
    missing = sorted(set(base_index) - set(sub_index))
    extra = sorted(set(sub_index) - set(base_index))
    shapes = sorted(n for n in set(sub_index) & set(base_index)
                    if sub_index[n][1].get("shape") != base_index[n][1].get("shape"))
    if missing or extra or shapes:
        return {"checked": True, "same_tensors": False, "missing": missing[:5],
                "extra": extra[:5], "shape_mismatch": shapes[:5]}
    changed = 0
    groups: dict[str, list[float]] = {}
    for name in sorted(base_index):
        a = _array(*sub_index[name])
        b = _array(*base_index[name])
        diff = float(np.square(a - b, dtype=np.float64).sum())
        ref = float(np.square(b, dtype=np.float64).sum())
        changed += diff > 0.0
        acc = groups.setdefault(layer_group(name), [0.0, 0.0])
        acc[0] += diff
        acc[1] += ref
    rel = {g: round(float(np.sqrt(d / r)) if r > 0 else (0.0 if d == 0 else float("inf")), 6)
           for g, (d, r) in sorted(groups.items())}
    top = max(rel, key=lambda g: rel[g])
    return {"checked": True, "same_tensors": True, "tensors": len(base_index),
            "changed_fraction": round(changed / len(base_index), 6),
            "relative_change": rel, "tied_head": tied,
            "max_relative_change": rel[top], "max_group": top,
            "median_relative_change": round(statistics.median(rel.values()), 6)}


def check_provenance(submission: str | Path, base: str | Path,
                     threshold: float = NOT_DERIVED_REL_CHANGE) -> dict[str, Any]:
    """The provenance record of one submission (results/<n>.json `provenance`): what was
    compared, `not_derived` (True, False, or None when nothing could be compared) and `reasons`."""
    started = time.monotonic()
    submission, base = Path(submission), Path(base)
    arch_sub, arch_base = architecture(submission), architecture(base)
    tok_sub, tok_base = tokenizer_identity(submission), tokenizer_identity(base)
    same_arch = None if arch_sub is None or arch_base is None else arch_sub == arch_base
    same_tok = None if tok_sub is None or tok_base is None else tok_sub == tok_base
    weights = weight_change(submission, base) if same_arch is not False else \
        {"checked": False, "reason": "the architecture differs"}
    reasons = []
    if same_arch is False:
        reasons.append(f"architecture {arch_sub} is not the base's {arch_base}")
    if same_tok is False:
        reasons.append("the tokenizer's vocabulary is not the base's")
    if weights.get("checked") and not weights.get("same_tensors"):
        reasons.append("its tensors are not the base's (names or shapes differ)")
    moved = weights.get("max_relative_change")
    if moved is not None and moved > threshold:
        over = sorted(g for g, v in weights["relative_change"].items() if v > threshold)
        reasons.append(f"layer group{'s' if len(over) > 1 else ''} {', '.join(over[:6])} moved "
                       f"by up to {moved:.3g} of {'their' if len(over) > 1 else 'its'} norm "
                       f"(fine-tuning moves every group by under {threshold}; the most "
                       f"measured: {MEASURED_MAX_FT})")
    known = same_arch is not None or same_tok is not None or weights.get("checked")
    return {"same_architecture": same_arch, "same_tokenizer": same_tok, "weights": weights,
            "not_derived": bool(reasons) if known else None, "reasons": reasons,
            "threshold": threshold, "elapsed_s": round(time.monotonic() - started, 3)}
