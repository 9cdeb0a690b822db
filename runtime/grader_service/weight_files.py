"""The weight files the evaluator loads from a model folder, and their tensors' headers.

Why its own module: what the provenance check compares (provenance.py), what intake lets through
(intake.py, `check_submission_weights`) and what the evaluator child loads (evaluate_one) must be
the same files, so the one resolution lives here, beside the one header reader.

`resolve_weight_files` mirrors the two loaders the evaluator uses (DESIGN 5c), transformers'
`from_pretrained` (transformers 5.25, `_get_resolved_checkpoint_files`) and vLLM's default
loader (`DefaultModelLoader._prepare_weights`):

- transformers reads `config.json`'s `transformers_weights` when set, else `model.safetensors`,
  else the shards named by `model.safetensors.index.json`'s `weight_map`;
- vLLM reads the top-level `consolidated*.safetensors` when there is one (its mistral format),
  else every top-level `*.safetensors`, narrowed to the index's shards when an index exists;
- both read every tensor of each file they open (a tensor in two files: the later one wins).

When the two would read different files the folder is refused (`unloaded_weights`: a
`model.safetensors` beside an index naming other shards, a stray `*.safetensors` next to
`model.safetensors`, a shard in a sub-folder, a `transformers_weights` redirection). At intake
(intake.py, `check_submission_weights`) a submission is also refused, with one line, when it
holds a weight file no loader reads (`*.safetensors`, `*.gguf` anywhere in the folder), an
`adapter_config.json` (transformers with peft installed applies the adapter on top), a tensor
stored in two loaded files, or a loaded file the check cannot read: a header that does not parse
the way the safetensors library parses it, offsets that do not tile the data, or a dtype outside
`COMPARABLE_DTYPES` (`unloaded_weights` / `unreadable_weights`). So every submission that is
scored has its every loaded tensor read here; nothing is scored "unchecked".
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_HEADER = 100 << 20   # safetensors' own limit on the JSON header
SAFE_WEIGHTS = "model.safetensors"               # transformers' SAFE_WEIGHTS_NAME
SAFE_INDEX = "model.safetensors.index.json"      # transformers' SAFE_WEIGHTS_INDEX_NAME
MISTRAL_INDEX = "consolidated.safetensors.index.json"   # vLLM's "mistral" load format
ADAPTER_CONFIG = "adapter_config.json"           # peft: from_pretrained applies the adapter
UNREAD_WEIGHT_SUFFIXES = (".safetensors", ".gguf")   # weight files that must be loaded or absent
# safetensors dtype -> bytes per element: what the check reads and compares
COMPARABLE_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
                     "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2,
                     "U8": 1, "BOOL": 1}
# dtypes safetensors 0.8 knows that the check does not compare (refused at intake)
KNOWN_DTYPES = (*COMPARABLE_DTYPES, "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0", "F4", "F6_E2M3",
                "F6_E3M2", "C64")


class WeightsRefused(ValueError):
    """A weight layout or file the check will not score: `code` (a2c.contracts.submission_errors)
    and a one-line message naming the file."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class TensorRef:
    path: Path
    dtype: str
    shape: tuple[int, ...]
    start: int            # absolute byte offsets in the file
    end: int


@dataclass
class LoadedWeights:
    """What the evaluator's loader reads from a folder: `files` (relative paths, in the order
    transformers reads them), how it found them (`layout`), and what it would not read."""
    folder: Path
    files: list[str]
    layout: str
    unread: list[str] = field(default_factory=list)      # weight files no loader reads
    redirects: list[str] = field(default_factory=list)   # transformers_weights, adapter_config


# ------------------------------------------------------------------ file resolution
def model_config(folder: Path) -> dict[str, Any] | None:
    """The folder's config.json as an object; None when it is missing or not one."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) else None


def _inside(name: Any) -> bool:
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return False
    return ".." not in Path(name).parts


def _index_shards(folder: Path, index_name: str) -> list[str]:
    """sorted(set(weight_map.values())), as transformers' get_checkpoint_shard_files."""
    try:
        index = json.loads((folder / index_name).read_text(encoding="utf-8"))
        weight_map = index["weight_map"]
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError("weight_map is not a non-empty object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WeightsRefused("unreadable_weights", f"{index_name} cannot be read as a safetensors "
                             f"index ({exc}); save with save_pretrained") from None
    shards = set(weight_map.values())
    bad = sorted(str(s) for s in shards if not _inside(s))
    if bad:
        raise WeightsRefused("unloaded_weights", f"{index_name} names {bad[0]!r}, outside the "
                             "model folder")
    return sorted(shards)


def transformers_files(folder: Path, config: dict[str, Any] | None = None) -> tuple[list[str], str]:
    """The safetensors files transformers' from_pretrained reads from a local folder (no
    variant, no subfolder): (files, what named them)."""
    config = model_config(folder) if config is None else config
    explicit = (config or {}).get("transformers_weights")
    if explicit is not None:
        if not _inside(explicit) or not str(explicit).endswith(
                (".safetensors", ".safetensors.index.json")):
            raise WeightsRefused("unloaded_weights", f"config.json's transformers_weights "
                                 f"{explicit!r} is not a safetensors file inside the folder")
        if explicit.endswith(".index.json"):
            return _index_shards(folder, explicit), f"transformers_weights: {explicit}"
        return [explicit], f"transformers_weights: {explicit}"
    if (folder / SAFE_WEIGHTS).is_file():
        return [SAFE_WEIGHTS], SAFE_WEIGHTS
    if (folder / SAFE_INDEX).is_file():
        return _index_shards(folder, SAFE_INDEX), SAFE_INDEX
    return [], "none"


def vllm_files(folder: Path) -> list[str]:
    """The safetensors files vLLM's default loader reads from a local folder (`load_format`
    auto): the top-level `consolidated*.safetensors` when there is one (its "mistral" format,
    narrowed by consolidated.safetensors.index.json), else every top-level `*.safetensors`
    narrowed to the weight_map of model.safetensors.index.json when there is one
    (`filter_duplicate_safetensors_files`). Checked against vLLM's own code in the `vllm` nox
    session (tests/runtime/grader_service/test_provenance_vllm_loader.py)."""
    names = sorted(e.name for e in os.scandir(folder)
                   if fnmatch.fnmatch(e.name, "*.safetensors") and not e.name.startswith("."))
    consolidated = [n for n in names if fnmatch.fnmatch(n, "consolidated*.safetensors")]
    found, index = (consolidated, MISTRAL_INDEX) if consolidated else (names, SAFE_INDEX)
    if found and (folder / index).is_file():
        try:
            listed = set(json.loads((folder / index).read_text(encoding="utf-8"))
                         ["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return found      # vLLM fails on it; transformers_files refuses it first
        found = [f for f in found if f in listed]
    return found


def _weight_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.name.lower().endswith(UNREAD_WEIGHT_SUFFIXES) and p.is_file())


def resolve_weight_files(folder: str | Path) -> LoadedWeights:
    """The weight files the evaluator loads from `folder`, the same whichever backend runs it
    (transformers or vLLM); `WeightsRefused` when the two would read different files or the
    index does not parse. The evaluator (evaluate_one) and this check both call it."""
    folder = Path(folder)
    config = model_config(folder)
    files, layout = transformers_files(folder, config)
    other = vllm_files(folder)
    if set(files) != set(other):
        only_tf = sorted(set(files) - set(other))
        only_vllm = sorted(set(other) - set(files))
        what = (f"transformers would load {', '.join(only_tf[:3])} and vLLM would not"
                if only_tf else f"vLLM would also load {', '.join(only_vllm[:3])}")
        raise WeightsRefused("unloaded_weights", f"the loaders disagree on the weights ({what}; "
                             f"transformers reads {layout}); keep only what save_pretrained "
                             "wrote: model.safetensors, or an index and its shards")
    unread = [f for f in _weight_files(folder) if f not in files]
    redirects = []
    if config and "transformers_weights" in config:
        redirects.append("config.json transformers_weights")
    if (folder / ADAPTER_CONFIG).exists():
        redirects.append(ADAPTER_CONFIG)
    return LoadedWeights(folder, files, layout, unread, redirects)


# ------------------------------------------------------------------ headers
def read_header(path: Path, shown: str | None = None) -> dict[str, TensorRef]:
    """{tensor name: TensorRef} of one safetensors file, validated as the safetensors library
    validates it (a JSON object, known dtypes, offsets that tile the data region exactly, sizes
    that match shapes) and restricted to COMPARABLE_DTYPES; `WeightsRefused` otherwise."""
    shown = shown or path.name

    def bad(why: str) -> WeightsRefused:
        return WeightsRefused("unreadable_weights", f"{shown} is not a readable safetensors "
                              f"file ({why}); save with save_pretrained(..., "
                              "safe_serialization=True)")

    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            raw = handle.read(8)
            if len(raw) < 8:
                raise bad("shorter than its 8-byte header length")
            n = int.from_bytes(raw, "little")
            if n > min(MAX_HEADER, size - 8):
                raise bad(f"header length {n} past the file's {size} bytes")
            text = handle.read(n)
    except OSError as exc:
        raise bad(exc.strerror or str(exc)) from None
    if not text.startswith(b"{"):     # safetensors: InvalidHeaderStart
        raise bad("its header does not start with '{'")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise bad("its header is not JSON") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(
            isinstance(v, str) for v in meta.values())):
        raise bad("__metadata__ is not an object of strings")
    start = 8 + n
    refs: dict[str, TensorRef] = {}
    spans = []
    for name, info in header.items():
        try:
            dtype, shape, (lo, hi) = info["dtype"], info["shape"], info["data_offsets"]
            if not all(type(x) is int and x >= 0 for x in (*shape, lo, hi)) or hi < lo:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise bad(f"tensor {name!r} has no valid dtype, shape and data_offsets") from None
        if dtype not in KNOWN_DTYPES:
            raise bad(f"tensor {name!r} has the unknown dtype {dtype!r}")
        if dtype not in COMPARABLE_DTYPES:
            raise WeightsRefused("unreadable_weights", f"tensor {name!r} in {shown} is stored as "
                                 f"{dtype}, which the provenance check cannot compare; save it as "
                                 "float32, bfloat16 or float16")
        count = 1
        for d in shape:
            count *= d
        if count * COMPARABLE_DTYPES[dtype] != hi - lo:
            raise bad(f"tensor {name!r}: {hi - lo} bytes for shape {shape} of {dtype}")
        refs[str(name)] = TensorRef(path, dtype, tuple(shape), start + lo, start + hi)
        spans.append((lo, hi, name))
    end = 0
    for lo, hi, name in sorted(spans):
        if lo != end:
            raise bad(f"tensor {name!r} does not start where the previous one ends")
        end = hi
    if start + end != size:
        raise bad(f"the tensors cover {end} of its {size - start} data bytes")
    return refs


def loaded_tensors(weights: LoadedWeights) -> dict[str, TensorRef]:
    """Every tensor the loader loads, over all its files; a name in two files is refused
    (which copy is kept depends on the backend's order)."""
    tensors: dict[str, TensorRef] = {}
    for rel in weights.files:
        path = weights.folder / rel
        if not path.is_file():
            raise WeightsRefused("unloaded_weights", f"{rel}, named by {weights.layout}, is not "
                                 "in the folder")
        for name, ref in read_header(path, rel).items():
            if name in tensors:
                raise WeightsRefused("unloaded_weights", f"tensor {name!r} is stored twice, in "
                                     f"{tensors[name].path.name} and {rel}; save once")
            tensors[name] = ref
    return tensors


def check_submission_weights(folder: str | Path) -> LoadedWeights:
    """Intake's gate (intake.py): the submission's weights are exactly the ones its loader
    reads, and every tensor of them can be compared; `WeightsRefused` (one line) otherwise."""
    weights = resolve_weight_files(folder)
    if weights.redirects:
        what = weights.redirects[0]
        fix = ("merge it (model.merge_and_unload()) and save the full model"
               if what == ADAPTER_CONFIG else "remove it")
        raise WeightsRefused("unloaded_weights", f"{what} makes the loader read weights the "
                             f"grader does not check; {fix}")
    if weights.unread:
        more = f" (and {len(weights.unread) - 1} more)" if len(weights.unread) > 1 else ""
        loads = ", ".join(weights.files[:2]) + ("..." if len(weights.files) > 2 else "") \
            if weights.files else "no weights: no model.safetensors or index"
        raise WeightsRefused("unloaded_weights", f"{weights.unread[0]}{more} is a weight file "
                             f"the evaluator does not load (it loads {loads}); remove it")
    loaded_tensors(weights)
    return weights
