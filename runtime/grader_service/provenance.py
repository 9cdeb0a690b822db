"""Provenance of a submitted model: is the state dict the evaluator loads derived from the base?

Why: the benchmark measures what an agent's post-training did to *this* base model. A submission
with another model's weights, a re-initialised model, or the base blended with either scores
something else; a copy of the base is caught by its hash already (weights.py).

**What is compared is what the evaluator loads**: the files and tensors `weight_files.py`
resolves and validates, the same for the evaluator (evaluate_one) and for intake's gate.

Then each valid submission is compared with the base:

- **architecture**: `config.json`'s `architectures`, `model_type` and the keys that fix the
  tensors' shapes are the base's;
- **tokenizer**: the vocabulary (`tokenizer.json`'s `model` section, else `vocab.json` /
  `merges.txt` / `tokenizer.model`) is the base's; missing tokenizer files are "unknown";
- **weights**: the same tensor names and shapes; every tensor read (all shards), upcast to
  float32 (float64 for F64 and integers; bf16 by a bit shift, fp8 through a 256-entry table) and
  compared: ‖w − b‖², ‖b‖² and ⟨w, b⟩ (float32 products over chunks, summed in float64), per
  tensor, per layer group (the embeddings, each `layers.<i>`, the output head, the rest) and
  over the whole model. Tied embeddings: a side that stores no head uses its embedding matrix
  as the head; a submission storing no head whose config no longer ties it (the base's does) is
  loaded with a random head, and is not derived.

Two statistics decide, each against a threshold calibrated in docs/grader-service.md
(`benchmarks/bench_provenance.py --calibrate`):

- the **relative change** ‖w − b‖ / ‖b‖ of every layer group (`NOT_DERIVED_REL_CHANGE`) and of
  every matrix (`NOT_DERIVED_MATRIX_CHANGE`: a small matrix moves further than its group):
  independent values in place of a matrix move it by at least 1;
- the **shrink** 1 − ⟨w, b⟩ / ‖b‖² of every layer group (`NOT_DERIVED_SHRINK`): a blend
  (1 − a)·base + a·foreign with a foreign model independent of the base shrinks every group by
  about a, whatever the foreign weights' scale, while fine-tuning moves weights across the base
  direction, not along it (only weight decay shrinks, by lr × decay per step).

A submission is **not derived** when its architecture or tokenizer differs, its tensors differ in
name or shape, a tensor holds NaN or infinity, or either statistic passes its threshold. What the
weights cannot tell apart: a model within those distances of the base, whatever its origin (a
blend whose shrink was undone by rescaling, a fine-tune made elsewhere): see the docs.

Cheap by construction: memory-mapped reads with numpy, one tensor at a time, in chunks; no torch.
benchmarks/bench_provenance.py prints the time as a ratio of one evaluation.
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path
from typing import Any

from a2c.contracts.provenance import Provenance, TensorMismatch, WeightChange
from a2c.runtime.grader_service.model_identity import architecture, tie_flag, tokenizer_identity
from a2c.runtime.grader_service.weight_files import (
    COMPARABLE_DTYPES,
    LoadedWeights,
    TensorRef,
    WeightsRefused,
    loaded_tensors,
    resolve_weight_files,
)

NOT_DERIVED_REL_CHANGE = 0.25   # of a layer group's norm (docs/grader-service.md: calibration)
NOT_DERIVED_MATRIX_CHANGE = 0.5  # of one matrix's norm: a matrix replaced moves by 1 or more
NOT_DERIVED_SHRINK = 0.05       # of a layer group's norm, along the base's direction
MEASURED_MAX_FT = 0.0147        # the largest per-group change of a real fine-tune (docs)
MEASURED_MAX_SHRINK = 0.0004    # the largest per-group |shrink| of a real fine-tune (docs)
CHUNK = 1 << 16          # elements a float32 product sums before a float64 total
HEAD = re.compile(r"(?:^|\.)(?:lm_head|embed_out|output)\.weight$")
LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")


_BASE_CACHE: dict[tuple[str, float], tuple[LoadedWeights, dict[str, TensorRef]]] = {}


def _base_tensors(base: Path) -> tuple[LoadedWeights, dict[str, TensorRef]]:
    key = (str(base.resolve()), max((p.stat().st_mtime for p in base.iterdir()), default=0.0))
    if key not in _BASE_CACHE:
        weights = resolve_weight_files(base)
        _BASE_CACHE.clear()
        _BASE_CACHE[key] = (weights, loaded_tensors(weights))
    return _BASE_CACHE[key]


def base_is_checkable(base: str | Path | None) -> bool:
    """Whether the base model has safetensors weights the check reads (a stand-in in tests,
    or a base in a pickle format only, has none: then there is no provenance check)."""
    if base is None or not Path(base).is_dir():
        return False
    try:
        return bool(_base_tensors(Path(base))[1])
    except (OSError, WeightsRefused):
        return False


# ------------------------------------------------------------------ tensors
_FP8: dict[str, Any] = {}


def _fp8_table(dtype: str):
    """The 256 values of an fp8 byte as float32 (OCP E4M3 "fn": no infinity, 0x7f/0xff NaN;
    E5M2: IEEE-like, the top byte of a float16)."""
    import numpy as np
    if dtype not in _FP8:
        codes = np.arange(256, dtype=np.uint16)
        if dtype == "F8_E5M2":
            table = (codes << 8).view(np.float16).astype(np.float32)
        else:
            sign = np.where(codes & 0x80, -1.0, 1.0)
            exp = (codes >> 3) & 0xF
            man = (codes & 0x7).astype(np.float64)
            value = np.where(exp == 0, man / 8 * 2.0 ** -6, (1 + man / 8) * 2.0 ** (exp - 7.0))
            value = np.where((exp == 0xF) & (man == 7), np.nan, value)
            table = (sign * value).astype(np.float32)
        _FP8[dtype] = table
    return _FP8[dtype]


def _array(ref: TensorRef):
    """One tensor as a flat float32 (float64 for F64 and integers) array, memory-mapped."""
    import numpy as np
    size = COMPARABLE_DTYPES[ref.dtype]
    count = (ref.end - ref.start) // size
    if count == 0:
        return np.zeros(0, dtype=np.float32)
    if ref.dtype == "BF16":
        raw = np.memmap(ref.path, dtype=np.uint16, mode="r", offset=ref.start, shape=(count,))
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if ref.dtype.startswith("F8_"):
        raw = np.memmap(ref.path, dtype=np.uint8, mode="r", offset=ref.start, shape=(count,))
        return _fp8_table(ref.dtype)[raw]
    numpy_dtype = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
                   "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2",
                   "U8": "u1", "BOOL": "?"}[ref.dtype]
    raw = np.memmap(ref.path, dtype=np.dtype(numpy_dtype), mode="r", offset=ref.start,
                    shape=(count,))
    return raw.astype(np.float32) if ref.dtype in ("F16", "F32") else raw.astype(np.float64)


def _sums(a, b) -> tuple[float, float, float]:
    """(‖a − b‖², ‖b‖², ⟨a, b⟩): float32 products over chunks of CHUNK elements (a chunk's
    rounding error is about √CHUNK × 6e-8 of its sum), chunks summed in float64; float64
    throughout when either side is float64."""
    import numpy as np
    wide = a.dtype == np.float64 or b.dtype == np.float64
    diff = ref = dot = 0.0
    for i in range(0, len(b), CHUNK):
        x, y = a[i:i + CHUNK], b[i:i + CHUNK]
        if wide:
            x, y = x.astype(np.float64), y.astype(np.float64)
        d = x - y
        diff += float(np.dot(d, d))
        ref += float(np.dot(y, y))
        dot += float(np.dot(x, y))
    return diff, ref, dot


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


def _rel(diff: float, ref: float) -> float:
    if ref > 0:
        return round(float(diff / ref) ** 0.5, 6)
    return 0.0 if diff == 0 else float("inf")


def _shrink(dot: float, ref: float) -> float:
    return round(1.0 - dot / ref, 6) if ref > 0 else 0.0


def weight_change(sub_index: dict[str, TensorRef],
                  base_index: dict[str, TensorRef]) -> WeightChange | TensorMismatch:
    """Every tensor: names and shapes compared, then per tensor, per layer group and over the
    model the relative change ‖w − b‖ / ‖b‖ and the shrink 1 − ⟨w, b⟩ / ‖b‖², the fraction of
    tensors changed, and the tensors holding NaN or infinity."""
    import math
    sub_index, base_index = dict(sub_index), dict(base_index)
    tied = _tie_heads(sub_index, base_index)
    missing = sorted(set(base_index) - set(sub_index))
    extra = sorted(set(sub_index) - set(base_index))
    shapes = sorted(n for n in set(sub_index) & set(base_index)
                    if sub_index[n].shape != base_index[n].shape)
    if missing or extra or shapes:
        return TensorMismatch(missing=missing[:5], extra=extra[:5], shape_mismatch=shapes[:5])
    changed = 0
    nonfinite: list[str] = []
    groups: dict[str, list[float]] = {}
    total = [0.0, 0.0, 0.0]
    top_tensor, top_tensor_rel = None, 0.0
    for name in sorted(base_index):
        diff, ref, dot = _sums(_array(sub_index[name]), _array(base_index[name]))
        if not (math.isfinite(diff) and math.isfinite(dot)):
            nonfinite.append(name)
            continue
        changed += diff > 0.0
        for acc in (groups.setdefault(layer_group(name), [0.0, 0.0, 0.0]), total):
            acc[0] += diff
            acc[1] += ref
            acc[2] += dot
        if len(base_index[name].shape) >= 2:
            rel = _rel(diff, ref)
            if rel > top_tensor_rel or top_tensor is None:
                top_tensor, top_tensor_rel = name, rel
    rel = {g: _rel(d, r) for g, (d, r, _) in sorted(groups.items())}
    shrink = {g: _shrink(p, r) for g, (_, r, p) in sorted(groups.items())}
    top = max(rel, key=lambda g: rel[g]) if rel else None
    top_shrink = max(shrink, key=lambda g: abs(shrink[g])) if shrink else None
    return WeightChange(
        tensors=len(base_index), changed_fraction=round(changed / max(1, len(base_index)), 6),
        relative_change=rel, shrink=shrink, tied_head=tied,
        max_relative_change=rel[top] if top else 0.0, max_group=top,
        median_relative_change=round(statistics.median(rel.values()), 6) if rel else 0.0,
        max_shrink=shrink[top_shrink] if top_shrink else 0.0, max_shrink_group=top_shrink,
        max_tensor_change=top_tensor_rel, max_tensor=top_tensor,
        model_relative_change=_rel(total[0], total[1]),
        model_shrink=_shrink(total[2], total[1]), nonfinite=nonfinite[:5])


def _verdict(weights: WeightChange | TensorMismatch, threshold: float,
             shrink_limit: float) -> list[str]:
    if not isinstance(weights, WeightChange):   # different tensors: nothing was measured
        return []
    reasons = []
    if weights.nonfinite:
        reasons.append(f"tensor {weights.nonfinite[0]} holds NaN or infinite values: its "
                       "change from the base cannot be measured")
    over = sorted(g for g, v in weights.relative_change.items() if v > threshold)
    if over:
        moved = weights.max_relative_change
        reasons.append(f"layer group{'s' if len(over) > 1 else ''} {', '.join(over[:6])} moved "
                       f"by up to {moved:.3g} of {'their' if len(over) > 1 else 'its'} norm "
                       f"(the check allows {threshold}; the most a measured fine-tune moved: "
                       f"{MEASURED_MAX_FT})")
    elif (weights.max_tensor_change or 0) > NOT_DERIVED_MATRIX_CHANGE:
        reasons.append(f"matrix {weights.max_tensor} moved by "
                       f"{weights.max_tensor_change:.3g} of its norm (the check allows "
                       f"{NOT_DERIVED_MATRIX_CHANGE} for one matrix)")
    shrunk = sorted(g for g, v in weights.shrink.items() if abs(v) > shrink_limit)
    if shrunk:
        s = weights.max_shrink
        reasons.append(f"layer group{'s' if len(shrunk) > 1 else ''} {', '.join(shrunk[:6])} "
                       f"{'shrank' if s > 0 else 'grew'} along the base's weights by up to "
                       f"{abs(s):.3g} (what blending with other weights does; fine-tuning "
                       f"measured at most {MEASURED_MAX_SHRINK}, the check allows {shrink_limit})")
    return reasons


def _head_left_to_chance(submission: Path, base: Path, sub_index: dict[str, Any]) -> bool:
    """The base ties its head to the embeddings and stores none; a submission that stores no
    head either but does not say it ties them gets a head the loader initialises at random
    (a missing tensor), which no comparison of stored tensors would see."""
    stores_head = any(layer_group(n) == "head" for n in sub_index)
    return not stores_head and tie_flag(base) is True and tie_flag(submission) is not True


def check_provenance(submission: str | Path, base: str | Path,
                     threshold: float = NOT_DERIVED_REL_CHANGE,
                     shrink_limit: float = NOT_DERIVED_SHRINK) -> Provenance:
    """The provenance record of one submission (results/<n>.json `provenance`): what was
    compared, `not_derived` (True or False, never unknown) and `reasons`. `WeightsRefused` when
    the submission's or the base's loaded weights cannot be read: a submission that passed
    intake never raises it."""
    started = time.monotonic()
    submission, base = Path(submission), Path(base)
    sub_weights = resolve_weight_files(submission)
    sub_index = loaded_tensors(sub_weights)
    base_weights, base_index = _base_tensors(base)
    if not sub_index:
        raise WeightsRefused("unreadable_weights", f"{submission.name} holds no weights the "
                             "evaluator loads (no model.safetensors or index)")
    if not base_index:
        raise WeightsRefused("unreadable_weights", f"the base {base} has no safetensors weights")
    arch_sub, arch_base = architecture(submission), architecture(base)
    tok_sub, tok_base = tokenizer_identity(submission), tokenizer_identity(base)
    same_arch = None if arch_sub is None or arch_base is None else arch_sub == arch_base
    same_tok = None if tok_sub is None or tok_base is None else tok_sub == tok_base
    weights = weight_change(sub_index, base_index)
    weights.files, weights.layout = sub_weights.files, sub_weights.layout
    reasons = []
    if same_arch is False:
        reasons.append(f"architecture {arch_sub} is not the base's {arch_base}")
    if same_tok is False:
        reasons.append("the tokenizer's vocabulary is not the base's")
    if sub_weights.unread or sub_weights.redirects:
        reasons.append(f"{(sub_weights.unread + sub_weights.redirects)[0]}: weights beside the "
                       "ones compared (intake refuses these)")
    if not weights.same_tensors:
        reasons.append("its tensors are not the base's (names or shapes differ)")
    elif _head_left_to_chance(submission, base, sub_index):
        reasons.append("config.json does not tie the output head to the embeddings as the "
                       "base's does and stores no head: the loader initialises it at random")
    reasons += _verdict(weights, threshold, shrink_limit)
    return Provenance(same_architecture=same_arch, same_tokenizer=same_tok,
                      weights=weights.to_dict(), not_derived=bool(reasons), reasons=reasons,
                      threshold=threshold, matrix_threshold=NOT_DERIVED_MATRIX_CHANGE,
                      shrink_threshold=shrink_limit,
                      elapsed_s=round(time.monotonic() - started, 3))
