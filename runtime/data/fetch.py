"""External data sets some paper tasks need, fetched into the cache (`a2c data fetch`), and the
download policy for the Hugging Face cache (`hub_download_allowed`, used by data and models).

Data sets are a small registry (`register_dataset`): a name, archives (URL, pinned sha256 where
known) and the path that must exist once extracted. A fetch streams each archive to a temporary
folder next to the destination while hashing it, checks the sha256, extracts it with every member
checked (no absolute paths, no `..`, no links), writes `a2c-data.json` (what was fetched, with the
hashes) and only then renames the folder into place (`a2c.fsutil.staged_dir`): an interrupted or
refused fetch leaves nothing behind. Where upstream publishes no checksum the hash seen on the
first fetch is recorded in `a2c-data.json` and printed, so it can be pinned.

A mirror (`mirror=`, or `$A2C_DATA_MIRROR`) serves the archives by file name from another base URL
(`http://...` or `file:///...`); the checksums still apply. The default destination is
`a2c.paths.cache_dir()/data/<name>`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from a2c.errors import A2CError
from a2c.fsutil import staged_dir
from a2c.settings import get, get_bool
from a2c.timefmt import iso_utc

MANIFEST = "a2c-data.json"
CHUNK = 1 << 20


@dataclass(frozen=True)
class Archive:
    url: str
    sha256: str | None = None        # None: not published upstream; recorded on first fetch

    @property
    def filename(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    archives: tuple[Archive, ...]
    expect: str = ""                 # a relative path that must exist after extraction
    notes: tuple[str, ...] = field(default_factory=tuple)


DATASETS: dict[str, Dataset] = {}


def register_dataset(ds: Dataset) -> Dataset:
    DATASETS[ds.name] = ds
    return ds


# The archives alfworld's own `alfworld-download` (alfworld 0.4.2) fetches for text-only play:
# traj_data.json files (ALFRED 2.1.1) and the TextWorld PDDL games (json_2.1.2 tw-pddl), both
# extracting into json_2.1.1/{train,valid_seen,valid_unseen}/<task>/<trial>/. The release assets
# have no published checksums.
ALFWORLD_RELEASES = "https://github.com/alfworld/alfworld/releases/download"
register_dataset(Dataset(
    name="alfworld",
    description="ALFWorld text games: json_2.1.1/{train,valid_seen,valid_unseen} "
                "(game.tw-pddl + traj_data.json); valid_unseen has the 134 evaluation games",
    archives=(Archive(f"{ALFWORLD_RELEASES}/0.2.2/json_2.1.1_json.zip"),
              Archive(f"{ALFWORLD_RELEASES}/0.4.0/json_2.1.2_tw-pddl.zip")),
    expect="json_2.1.1/valid_unseen",
))


def default_dest(name: str) -> Path:
    from a2c.paths import cache_dir
    return cache_dir() / "data" / name


def dataset_path(name: str) -> Path | None:
    """Where a fetched data set is (default location), or None when it is not there."""
    dest = default_dest(name)
    return dest if (dest / MANIFEST).is_file() else None


def hub_download_allowed() -> bool:
    """Whether a2c may download from the Hugging Face hub (`A2C_HUB_DOWNLOAD=1`); by default
    models and hub data sets come from the local cache only."""
    return get_bool("A2C_HUB_DOWNLOAD")


def _download(url: str, dst: Path, say) -> tuple[str, int]:
    """Stream url to dst; return (sha256, bytes)."""
    h, n, last = hashlib.sha256(), 0, time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, open(dst, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0)
            while True:
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                h.update(chunk)
                n += len(chunk)
                if time.monotonic() - last > 5:
                    last = time.monotonic()
                    say(f"  {n / 1e6:.0f} MB" + (f" of {total / 1e6:.0f} MB" if total else ""))
    except OSError as exc:  # URLError, HTTPError, socket errors
        raise A2CError(f"download of {url} failed: {exc}") from None
    return h.hexdigest(), n


def _member_target(root: Path, info: zipfile.ZipInfo) -> Path:
    name = info.filename
    p = PurePosixPath(name.replace("\\", "/"))
    mode = info.external_attr >> 16
    if (p.is_absolute() or ".." in p.parts or (p.parts and ":" in p.parts[0])
            or stat.S_ISLNK(mode)):
        raise A2CError(f"refusing archive member {name!r}: it would land outside the destination "
                       f"or is a link")
    target = (root / Path(*p.parts)).resolve() if p.parts else root
    if target != root and root not in target.parents:
        raise A2CError(f"refusing archive member {name!r}: it would land outside the destination")
    return target


def safe_extract(archive: Path, root: Path) -> int:
    """Extract a zip into root, refusing members outside it (checked before writing any)."""
    root = root.resolve()
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            targets = [(_member_target(root, i), i) for i in infos]
            for target, info in targets:
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
    except zipfile.BadZipFile as exc:
        raise A2CError(f"{archive.name} is not a valid zip archive: {exc}") from None
    return len(infos)


def fetch(name: str, dest: str | Path | None = None, *, mirror: str | None = None,
          force: bool = False, say=print) -> Path:
    if name not in DATASETS:
        raise A2CError(f"unknown data set {name!r}; known: {', '.join(sorted(DATASETS))}")
    ds = DATASETS[name]
    dest = Path(dest) if dest else default_dest(name)
    if (dest / MANIFEST).is_file() and not force:
        say(f"{name}: already fetched at {dest} (use --force to fetch again)")
        return dest
    if dest.exists() and not (dest / MANIFEST).is_file() and any(dest.iterdir()) and not force:
        raise A2CError(f"{dest} exists and is not an a2c data folder; choose another --dest or "
                       f"use --force to replace it")
    mirror = mirror or get("A2C_DATA_MIRROR")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # archives download into `tmp`; the data set is built in `out` and swapped in at `dest`
    with (tempfile.TemporaryDirectory(prefix=f".{dest.name}.dl-", dir=dest.parent) as tmp,
          staged_dir(dest) as out):
        tmp = Path(tmp)
        fetched = []
        for arc in ds.archives:
            url = f"{mirror.rstrip('/')}/{arc.filename}" if mirror else arc.url
            say(f"{name}: downloading {url}")
            path = tmp / arc.filename
            digest, size = _download(url, path, say)
            if arc.sha256 and digest != arc.sha256:
                raise A2CError(f"checksum mismatch for {arc.filename}: expected sha256 "
                               f"{arc.sha256}, got {digest}; nothing was kept")
            n = safe_extract(path, out)
            path.unlink()
            fetched.append({"url": url, "file": arc.filename, "sha256": digest, "bytes": size,
                            "pinned": bool(arc.sha256), "members": n})
            say(f"{name}: {arc.filename}: {size / 1e6:.1f} MB, {n} files, sha256 {digest}"
                + ("" if arc.sha256 else " (not pinned upstream: recorded in " + MANIFEST + ")"))
        if ds.expect and not (out / ds.expect).exists():
            raise A2CError(f"{name}: the archives did not contain {ds.expect}")
        (out / MANIFEST).write_text(json.dumps(
            {"name": name, "archives": fetched,
             "fetched_at": iso_utc(time.time())},
            indent=1, sort_keys=True) + "\n")
    say(f"{name}: ready at {dest}")
    return dest
