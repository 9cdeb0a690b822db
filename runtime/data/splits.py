"""A task's two parts (agent, held-out): each split read once, sliced python-style, mapped to the
canonical fields, ids checked unique and disjoint; the held-out part's final split (feedback vs
final items); and the folder record paths resolve against."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterable
from pathlib import Path

from a2c.contracts.spec import DataSpec, FinalSplitSpec, SplitSpec, TaskSpec
from a2c.paths import cache_dir as _default_cache_dir

from . import generators
from .generators import DataError
from .source import DataSource
from .sources import generate, raw_split, seeds_heldout

PARTS = ("agent", "heldout")


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


def _cache(cache: str | Path | None) -> Path:
    return Path(cache) if cache is not None else _default_cache_dir() / "data"


def _part(data: DataSpec, which: str) -> SplitSpec:
    if which not in PARTS:
        raise DataError(f"which must be one of {PARTS}, got {which!r}")
    part = data.agent if which == "agent" else data.heldout
    if not isinstance(part, SplitSpec) or not part.split:
        raise DataError(f"task data has no {which!r} split")
    return part


def _heldout_splits(data: DataSpec) -> tuple[str, ...]:
    """The held-out split a generator source draws from its derived seed (sources.generate);
    refused when the agent's part reads the same split of such a generator (the spec's seed
    would then regenerate the held-out items)."""
    source = DataSource.of(data.source)
    if source.generator is None:
        return ()
    agent, held = str(_part(data, "agent").split), str(_part(data, "heldout").split)
    if agent == held and seeds_heldout(generators.get_generator(source.generator)):
        raise DataError(f"generator {source.generator!r}: the agent's part and the held-out "
                        f"part both read split {held!r}; give the held-out part its own split "
                        "so it is drawn from a seed the spec does not reveal")
    return (held,)


def load_splits(task: TaskSpec, bundle_root: str | Path, cache: str | Path | None = None
                ) -> dict[str, list[dict]]:
    """Both parts of a task's data, mapped, with unique ids and no agent/held-out overlap."""
    data = task.data
    source = DataSource.of(data.source)
    bundle_root, cache = Path(bundle_root), _cache(cache)
    raw: dict[str, list[dict]] = {}
    out: dict[str, list[dict]] = {}
    ids_of: dict[str, set] = {}
    heldout = _heldout_splits(data)
    for which in PARTS:
        part = _part(data, which)
        split = str(part.split)
        if split not in raw:
            raw[split] = raw_split(source, split, bundle_root, cache, heldout)
        rows = raw[split]
        indices = list(range(len(rows)))[parse_slice(part.slice)]
        records = _map_fields([rows[i] for i in indices], indices, split, data.fields)
        ids = [r["id"] for r in records]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise DataError(f"{which} split {split!r}: duplicate ids {dup}")
        if not records:
            raise DataError(f"{which} split {split!r} slice {part.slice!r} is empty "
                            f"({len(rows)} rows in the split)")
        out[which], ids_of[which] = records, set(ids)
    overlap = ids_of["agent"] & ids_of["heldout"]
    if overlap:
        raise DataError(f"agent and held-out data share {len(overlap)} id(s), e.g. "
                        f"{sorted(overlap)[:5]}: fix the splits/slices so the held-out data "
                        "stays unseen")
    return out


def load_split(task: TaskSpec, which: str, bundle_root: str | Path,
               cache: str | Path | None = None) -> list[dict]:
    """One part ("agent" or "heldout") of a task's data as canonical records (see module doc)."""
    _part(task.data, which)
    return load_splits(task, bundle_root, cache)[which]


def data_root(task: TaskSpec, bundle_root: str | Path, cache: str | Path | None = None) -> Path:
    """The data set's root: the folder relative file paths inside a task's records resolve against.

    Generators: their cache folder (generate first with load_split); local files: the bundle;
    otherwise the bundle too (hub and package records reference no files). (Not the environment's
    data root, `a2c.runtime.envs.rollout_grader.env_data_root`: where a running environment looks
    for those files, which callers set from this one.)
    """
    source = DataSource.of(task.data.source)
    if source.generator is not None:
        return generate(source, _cache(cache), _heldout_splits(task.data))
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


def split_final(records: list[dict], final: FinalSplitSpec | None
                ) -> tuple[list[dict], list[dict]]:
    """(feedback, final): the held-out records parted by the task's `scoring.final`.

    Why: the best of many submissions scored on the items that gave the agent its feedback is
    selected on those items and overstates the model; a part the agent never gets a score on
    measures it without that selection. Each record's rank is sha256(seed:id), so the parts depend
    only on the seed and the ids (not on the order the source yields them) and are the same on
    every machine; `round(fraction * n)` records go to the final part. No `final`: every record
    is feedback and the final part is empty. Both parts must keep at least one record.
    """
    if not final:
        return list(records), []
    fraction, seed = float(final.fraction), int(final.seed or 0)
    n_final = int(round(fraction * len(records)))
    if n_final < 1 or n_final >= len(records):
        raise DataError(f"scoring.final: fraction {fraction} of {len(records)} held-out records "
                        f"leaves {n_final} final and {len(records) - n_final} feedback records; "
                        "both parts need at least one")

    ids = [r["id"] for r in records]

    def rank(record_id: object) -> str:
        return hashlib.sha256(f"{seed}:{record_id}".encode()).hexdigest()

    final_ids = set(sorted(ids, key=rank)[:n_final])
    return ([r for r, i in zip(records, ids) if i not in final_ids],
            [r for r, i in zip(records, ids) if i in final_ids])
