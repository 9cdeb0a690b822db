"""The baseline: the base model scored once per (task, base model, grader, held-out set), cached.

The cache key is the sha256 of canonical JSON over the task id, the base model's fingerprint
(`sha256_tree` of its folder), the grader kind and version, a hash of the whole grader
configuration (decoding settings change scores) and the held-out fingerprint. Only a valid result
is cached; a failed evaluation is reported as failed (`valid: false`, `score: null`), never as 0.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json, sha256_file, sha256_json
from a2c.contracts.grade_result import ResultHeader
from a2c.contracts.records import Record
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import SERVICE_JSON, ServiceConfig, as_grader_spec
from a2c.contracts.spec import GraderSpec
from a2c.fsutil import file_lock, write_bytes_atomic
from a2c.runtime.grader_service.evaluator import run_evaluation
from a2c.runtime.models import model_fingerprint


def heldout_fingerprint(path: str | Path) -> str:
    try:
        from a2c.runtime.data import fingerprint, read_jsonl

        return fingerprint(read_jsonl(path))
    except ImportError:
        return sha256_file(path)


@dataclass
class BaselineSummary(Record):
    """What scoring the base model gave (`compute_baseline`): the score (None when it failed,
    never 0), whether it came from the cache and under which key, and the full result."""

    valid: bool = False
    score: float | None = None
    ci95: list[float] | None = None
    error: str | None = None
    cached: bool = False
    key: str | None = None
    key_parts: dict[str, Any] | None = None
    elapsed_s: float = 0.0
    result: dict[str, Any] | None = None     # the GradeResult dict (None when it failed)


def _kind(grader: GraderSpec) -> str:
    """The grader's kind as the cache key names it ("unknown" for a section without one)."""
    return str(grader.kind or "unknown")


def grader_identity(grader_cfg: GraderSpec) -> tuple[str, str | None]:
    """(kind, version) from the grader registry; version None when the registry can't say."""
    kind = _kind(grader_cfg)
    try:
        from a2c.runtime.graders import get_grader

        return kind, str(get_grader(grader_cfg).version)
    except Exception:
        return kind, None


# Where a grader finds its data on this machine, not what it grades: a run (RUN/grader/...) and
# `a2c check` (its own copy of the bundle) score the same held-out items from two folders.
LOCATION_KEYS = {"env": ("data_root",)}


def portable_config(grader_cfg: GraderSpec) -> dict[str, Any]:
    """The grader config (as its JSON) without machine-local locations (LOCATION_KEYS), so that
    one baseline serves every run and check of the same task, model, grader and held-out items
    (the items themselves are in the key by their fingerprint)."""
    out = grader_cfg.to_dict()
    for section, keys in LOCATION_KEYS.items():
        if isinstance(out.get(section), dict):
            out[section] = {k: v for k, v in out[section].items() if k not in keys}
    return out


def baseline_key_parts(*, task_id: str, base_fingerprint: str, grader_cfg: GraderSpec,
                       grader_version: str, heldout_fp: str) -> dict[str, Any]:
    return {"task_id": task_id, "base_model": base_fingerprint,
            "grader_kind": _kind(grader_cfg),
            "grader_version": grader_version,
            "grader_config": sha256_json(portable_config(grader_cfg)),
            "heldout": heldout_fp}


@dataclass
class CacheEntry(Record):
    """One cached baseline (BASELINE_CACHE/<key>.json): the key, what it hashes, the result."""

    key: str | None = None
    key_parts: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    created_unix: float | None = None


def _write_json_atomic(path: Path, data: Any) -> None:
    """Canonical bytes, no newline, 0600: the form baseline records have always had."""
    write_bytes_atomic(path, canonical_json(data), mode=0o600)


def _lookup_or_evaluate(key, key_parts, parts_for, *, use_cache, cache_dir, run_dir, grader_cfg,
                        evaluator, base_model, heldout, engine, timeout_s, use_bwrap=True):
    result: dict[str, Any] | None = None
    error: str | None = None
    cached = False
    if use_cache and cache_dir and key:
        entry = cache_dir / f"{key}.json"
        if entry.is_file():
            try:
                stored = CacheEntry.from_dict(json.loads(entry.read_text(encoding="utf-8")))
                if isinstance(stored.result, dict) and ResultHeader.of(stored.result).ok:
                    result, cached = stored.result, True
            except (OSError, ValueError, TypeError, AttributeError):
                result = None
    if result is None:
        # without a run: a scratch folder for the config and the evaluation log, removed after
        scratch = None if run_dir else Path(tempfile.mkdtemp(prefix="a2c-baseline-"))
        work = RunPaths(Path(run_dir)).grader if run_dir else scratch
        try:
            work.mkdir(parents=True, exist_ok=True)
            cfg_path = work / "baseline.grader.json"
            _write_json_atomic(cfg_path, grader_cfg.to_dict())
            outcome = run_evaluation(
                evaluator or [sys.executable, "-m", "a2c.runtime.grader_service.evaluate_one"],
                grader_cfg_path=cfg_path, model=Path(base_model), heldout=Path(heldout),
                engine=engine, out_path=work / "eval" / "baseline.json", timeout_s=timeout_s,
                log_path=work / "eval" / "baseline.log", use_bwrap=use_bwrap)
            if outcome.valid:
                result = outcome.result
                if key is None:  # the registry was not importable here: the child knows the version
                    key_parts = parts_for(str(outcome.header.grader_version or "unknown"))
                    key = sha256_json(key_parts)
                if use_cache and cache_dir:
                    _write_json_atomic(cache_dir / f"{key}.json", CacheEntry(
                        key=key, key_parts=key_parts, result=result,
                        created_unix=time.time()).to_dict())
            else:
                error = outcome.message
                result = outcome.result
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
    return result, error, cached, key, key_parts


def compute_baseline(*, task_id: str, base_model: str | Path,
                     grader_cfg: GraderSpec | dict[str, Any],
                     heldout: str | Path, engine: str = "auto",
                     cache_dir: str | Path | None = None, timeout_s: float = 3600.0,
                     run_dir: str | Path | None = None, evaluator: list[str] | None = None,
                     use_cache: bool = True, use_bwrap: bool = True) -> BaselineSummary:
    """Score the base model on the held-out set, from the cache when possible. With `run_dir`,
    also writes `run_dir/results/baseline.json` and appends a `baseline_scored` event to
    `run_dir/events.jsonl`. `grader_cfg`: a task's grader section (a dict is read here)."""
    started = time.monotonic()
    grader_cfg = as_grader_spec(grader_cfg)
    base_fp = model_fingerprint(base_model)
    held_fp = heldout_fingerprint(heldout)
    _, version = grader_identity(grader_cfg)
    cache_dir = Path(cache_dir) if cache_dir else None

    def parts_for(v: str) -> dict[str, Any]:
        return baseline_key_parts(task_id=task_id, base_fingerprint=base_fp, grader_cfg=grader_cfg,
                                  grader_version=v, heldout_fp=held_fp)

    key_parts = parts_for(version) if version is not None else None
    key = sha256_json(key_parts) if key_parts else None
    # Concurrent runs of the same task: the first evaluates, the others wait and hit the cache.
    locked = use_cache and cache_dir and key
    with file_lock(cache_dir / f".{key}.lock") if locked else contextlib.nullcontext():
        result, error, cached, key, key_parts = _lookup_or_evaluate(
            key, key_parts, parts_for, use_cache=use_cache, cache_dir=cache_dir,
            run_dir=run_dir, grader_cfg=grader_cfg, evaluator=evaluator, base_model=base_model,
            heldout=heldout, engine=engine, timeout_s=timeout_s, use_bwrap=use_bwrap)
    valid = error is None
    header = ResultHeader.of(result)
    summary = BaselineSummary(
        valid=valid, score=header.score if valid else None, ci95=header.ci95 if valid else None,
        error=error, cached=cached, key=key, key_parts=key_parts,
        elapsed_s=round(time.monotonic() - started, 3), result=result if valid else None)
    if run_dir is not None:
        run_dir = Path(run_dir)
        _write_json_atomic(RunPaths(run_dir).baseline_result,
                           {**(result if valid and result else {}),
                            "valid": valid, "score": summary.score, "error": error,
                            "cached": cached, "key": key})
        from a2c.contracts.events import EventLog

        EventLog(RunPaths(run_dir).events).append("baseline_scored", {
            "score": summary.score, "ci95": summary.ci95, "valid": valid, "error": error,
            "cached": cached, "key": key, "elapsed_s": summary.elapsed_s,
            "backend": header.backend})
    return summary


def compute_baseline_for_run(run_dir: str | Path, *, use_cache: bool = True) -> BaselineSummary:
    """compute_baseline with everything taken from RUN_DIR/grader/service.json."""
    cfg = ServiceConfig.load(run_dir)
    if cfg.base_model is None or cfg.heldout is None:
        from a2c.errors import RunError

        raise RunError(f"{run_dir}/{SERVICE_JSON}: base_model and heldout are needed for "
                       "the baseline")
    return compute_baseline(task_id=cfg.resolved_task_id(), base_model=cfg.base_model,
                            grader_cfg=cfg.grader_config(), heldout=cfg.heldout,
                            engine=cfg.engine, cache_dir=cfg.baseline_cache,
                            timeout_s=cfg.eval_timeout_s, run_dir=cfg.run_dir,
                            evaluator=cfg.evaluator, use_cache=use_cache,
                            use_bwrap=cfg.use_bwrap)
