"""The grader service's state: the journal, the queue, the worker, the limits.

Everything the service knows is in `submissions.jsonl` (the journal): a `received` line is
appended and fsync'ed before a submission is acknowledged, a `scored` line when its result is in
`results/<n>.json`. A restart replays the journal: scored submissions keep their results,
received-but-unscored ones are queued again (in id order), ids continue after the last one.

What is scored is what was hashed: at submit the folder is copied into `grader/submissions/<n>/`
(intake.py: regular files only, limits, one submission at a time), hashed from that copy and
later evaluated from it; the agent's folder is never read again. Once scored, a copy that can no
longer count (neither the best nor the last valid one) is removed (pruning.py).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.contracts.events import (
    EventLog,
    SubmissionPruned,
    SubmissionReceived,
    SubmissionScored,
    utc_now,
)
from a2c.contracts.grade_result import read_result
from a2c.contracts.journal import Journal, JournalReceived, JournalScored
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import ServiceConfig
from a2c.contracts.submission_errors import SubmissionError, eval_failure_code
from a2c.fsutil import PRIVATE_FILE, private_dir, write_bytes_atomic
from a2c.runtime.grader_service.base_ref import BaseReference
from a2c.runtime.grader_service.baseline import compute_baseline
from a2c.runtime.grader_service.common import (  # noqa: F401 - Refusal and log: server's API
    Refusal,
    _scalar_metrics,
    log,
    result_summary,
)
from a2c.runtime.grader_service.evaluator import ProcessSlot, run_evaluation
from a2c.runtime.grader_service.intake import _remove, copy_submission
from a2c.runtime.grader_service.limits import check_limits, current_limits
from a2c.runtime.grader_service.model_path import resolve_model_path
from a2c.runtime.grader_service.pruning import prunable, tree_bytes
from a2c.runtime.grader_service.weights import weights_fingerprint
from a2c.runtime.inference.chat_template import SOURCE_KEY

PUBLIC_FIELDS = ("id", "status", "score", "ci95", "valid", "error", "code", "duplicate_of",
                 "copy_of_base", "not_derived",
                 "model_path", "note", "weights_hash", "received_at", "scored_at", "elapsed_s",
                 "backend", "metrics", "queue_position")


class GradingService:
    def __init__(self, cfg: ServiceConfig):
        self.cfg = cfg
        self.run_dir = cfg.run_dir
        self.paths = RunPaths(cfg.run_dir)
        private_dir(self.paths.results)   # per-item prompts and gold answers: 0700, files 0600
        private_dir(self.paths.eval_dir)
        self.journal = Journal(self.paths.journal, log=log)
        self.events = EventLog(self.paths.events)
        self.output_dir = Path(os.path.realpath(cfg.output_dir))
        self.lock = threading.RLock()
        self.intake_lock = threading.Lock()   # one submission copied and hashed at a time
        self.paths.submissions.mkdir(mode=0o700, parents=True, exist_ok=True)
        for stale in self.paths.submissions.glob(".incoming-*"):   # a crash mid-copy
            _remove(stale)
        self.cond = threading.Condition(self.lock)
        self.subs: dict[int, dict[str, Any]] = {}
        self.queue: list[int] = []
        self.running: int | None = None
        self.last_received_unix: float | None = None
        self.stopping = False
        self.slot = ProcessSlot()
        self.snapshotter = None
        if cfg.snapshots and cfg.workspace is not None and Path(cfg.workspace).is_dir():
            from a2c.contracts.outside import outside_roots
            from a2c.runtime.snapshots import Snapshotter

            self.snapshotter = Snapshotter(self.paths.snapshots, cfg.workspace,
                                           event_log=self.events,
                                           outside=outside_roots(self.paths))
        self._grader_cfg_path: Path | None = None
        self.base = BaseReference(cfg.base_model)
        self._baseline: dict[str, Any] | None = None
        self._base_checkable: bool | None = None   # provenance: see _checks_provenance
        self._replay()
        self.worker = threading.Thread(target=self._work, name="grader-worker", daemon=True)

    # ------------------------------------------------------------------ resume
    def _replay(self) -> None:
        for entry in self.journal.read():
            op, sid = entry.get("op"), entry.get("id")
            if not isinstance(sid, int):
                continue
            if op == "received":
                self.subs[sid] = {**entry, "status": "queued"}
                self.subs[sid].pop("op", None)
                ts = entry.get("received_unix")
                if isinstance(ts, (int, float)):
                    self.last_received_unix = max(self.last_received_unix or 0, ts)
            elif op == "scored" and sid in self.subs:
                sub = self.subs[sid]
                sub.update({k: v for k, v in entry.items() if k not in ("op", "ts", "id")})
                sub["scored_at"] = entry.get("ts")
                sub["status"] = "scored" if entry.get("valid") else "invalid"
        self.queue = sorted(s for s, sub in self.subs.items() if sub["status"] == "queued")
        if self.subs:
            log(f"resumed from the journal: {len(self.subs)} submissions, "
                f"{len(self.queue)} to (re)evaluate")

    def next_id(self) -> int:
        return max(self.subs, default=0) + 1

    # ------------------------------------------------------------------ limits
    def limits(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        queued = len(self.queue) + (1 if self.running else 0)
        return current_limits(self.cfg, len(self.subs), self.last_received_unix, queued, now)

    def _check_limits(self, now: float) -> None:
        check_limits(self.cfg, len(self.subs), self.last_received_unix, self.stopping, now)

    # ------------------------------------------------------------------ paths
    def resolve_model_path(self, given: Any) -> tuple[str, Path]:
        """Map the agent's path to a host path inside the output folder, or refuse."""
        return resolve_model_path(self.cfg, self.output_dir, given)

    # ------------------------------------------------------------------ submit
    def submit(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise Refusal(400, "bad_request", "the request body must be a JSON object "
                          "{\"model_path\": ..., \"note\": ...}")
        if "model_path" not in body:
            raise Refusal(400, "bad_request", "missing field: model_path", field="model_path")
        note = body.get("note")
        if note is not None and not isinstance(note, str):
            raise Refusal(400, "bad_request", "note must be a string", field="note")
        note = (note or "")[:2000]
        with self.lock:
            self._check_limits(time.time())
        shown, host = self.resolve_model_path(body["model_path"])
        with self.intake_lock:  # copies and hashes never run side by side
            with self.lock:
                self._check_limits(time.time())  # one accepted while this one waited
            incoming = self.paths.submissions / f".incoming-{secrets.token_hex(8)}"
            intake = copy_submission(host, self.output_dir, incoming, shown=shown,
                                     limit=self.cfg.agent_output_dir,
                                     max_bytes=self.cfg.max_submission_bytes,
                                     max_files=self.cfg.max_submission_files,
                                     check_weights=self._checks_provenance())
            weights_hash = intake.folder_hash
            try:
                with self.lock:
                    now = time.time()
                    self._check_limits(now)  # again: the limits may have changed meanwhile
                    sid = self.next_id()
                    target = self.copy_path(sid)
                    _remove(target)   # left by a crash between the rename and the journal
                    os.rename(incoming, target)
                    entry = JournalReceived(id=sid, ts=utc_now(), received_unix=now,
                                            model_path=shown, host_path=str(host),
                                            weights_hash=weights_hash, note=note).to_dict()
                    self.journal.append(entry)  # durable before anything else happens
                    sub = {k: v for k, v in entry.items() if k != "op"}
                    sub.update(status="queued", received_at=entry["ts"],
                               tensors_hash=intake.weights_hash)
                    self.subs[sid] = sub
                    self.last_received_unix = now
                    self.events.emit(SubmissionReceived(id=sid, model_path=shown,
                                                        weights_hash=weights_hash, note=note))
                    self.queue.append(sid)
                    position = len(self.queue) + (1 if self.running is not None else 0)
                    self.cond.notify_all()
            finally:
                _remove(incoming)   # gone already unless refused after the copy
        snapshot = None
        if self.snapshotter is not None:
            try:
                info = self.snapshotter.snapshot("submission", submission_id=sid)
                self.snapshotter.tag_submission(sid, info["commit"])
                snapshot = info["commit"]
                with self.lock:
                    self.subs[sid]["snapshot"] = snapshot
            except Exception as exc:  # a snapshot failure never costs the agent its submission
                log(f"snapshot for submission {sid} failed: {exc}")
        left = self.limits(now)["submissions_left"]
        log(f"submission {sid} received: {shown} ({weights_hash[:12]}; {intake.files} files, "
            f"{intake.bytes} bytes copied and hashed in {intake.elapsed_s:.3f} s)")
        return {"id": sid, "status": "queued", "weights_hash": weights_hash,
                "queue_position": position, "submissions_left": left, "snapshot": snapshot}

    # ------------------------------------------------------------------ queries
    def public(self, sub: dict[str, Any]) -> dict[str, Any]:
        out = {k: sub.get(k) for k in PUBLIC_FIELDS if k in sub or k in ("score", "error")}
        out["metrics"] = _scalar_metrics(sub.get("metrics"))
        if sub["status"] == "queued" and sub["id"] in self.queue:
            out["queue_position"] = self.queue.index(sub["id"]) + 1 + (
                1 if self.running is not None else 0)
        else:
            out.pop("queue_position", None)
        return out

    def get(self, sid: int) -> dict[str, Any]:
        with self.lock:
            if sid not in self.subs:
                raise Refusal(404, "not_found", f"no submission with id {sid}",
                              limit=max(self.subs, default=0))
            return self.public(self.subs[sid])

    def list(self) -> dict[str, Any]:
        with self.lock:
            subs = [self.public(self.subs[s]) for s in sorted(self.subs)]
            valid = [s for s in subs if s["status"] == "scored" and s.get("score") is not None]
            best = max(valid, key=lambda s: (s["score"], -s["id"]), default=None)
            return {"submissions": subs, "best": ({"id": best["id"], "score": best["score"]}
                                                  if best else None),
                    **{k: v for k, v in self.limits().items()
                       if k in ("submissions_left", "remaining_s")}}

    def idle(self) -> bool:
        with self.lock:
            return not self.queue and self.running is None

    # ------------------------------------------------------------------ worker
    def start(self) -> None:
        self.worker.start()

    def copy_path(self, sid: int) -> Path:
        """The grader's copy of submission `sid` (made at submit; what is evaluated)."""
        return self.paths.submissions / str(sid)

    def _grader_cfg_file(self) -> Path:
        """The grader section plus the chat template prompts are built with: the base model's,
        never the submission's (runtime/inference/chat_template.py)."""
        if self._grader_cfg_path is None:
            path = self.paths.grader_effective
            write_bytes_atomic(path, canonical_json({**self.cfg.grader_config(),
                                                     SOURCE_KEY: self.base.template_source()}),
                               mode=PRIVATE_FILE)
            self._grader_cfg_path = path
        return self._grader_cfg_path

    def _work(self) -> None:
        if self.cfg.baseline:
            try:
                self._run_baseline()
            except Exception:
                log("baseline failed:\n" + traceback.format_exc())
        while True:
            with self.lock:
                while not self.queue and not self.stopping:
                    self.cond.wait(0.5)
                if self.stopping:
                    return
                sid = self.queue.pop(0)
                self.running = sid
                self.subs[sid]["status"] = "running"
            try:
                self._evaluate(sid)
            except Exception as exc:  # bookkeeping bug: record, keep serving
                log(f"submission {sid}: internal error:\n{traceback.format_exc()}")
                try:
                    self._finish(sid, {"score": None, "valid": False,
                                       "error": f"internal grader error: {exc}",
                                       "code": SubmissionError.INTERNAL_ERROR.value})
                except Exception:  # e.g. the disk is full: stays unscored, re-queued on resume
                    log(f"submission {sid}: could not record the error:\n"
                        f"{traceback.format_exc()}")
                    with self.lock:
                        self.subs[sid].update(status="invalid", score=None, error=(
                            f"internal grader error, not recorded (re-evaluated on resume): {exc}"))
            finally:
                with self.lock:
                    self.running = None
                    self.cond.notify_all()

    def _run_baseline(self) -> None:
        if self.paths.baseline_result.is_file():
            return
        if self.cfg.base_model is None or self.cfg.heldout is None:
            return
        summary = compute_baseline(task_id=self.cfg.resolved_task_id(),
                                   base_model=self.cfg.base_model,
                                   grader_cfg=self.cfg.grader_config(), heldout=self.cfg.heldout,
                                   backend=self.cfg.backend, cache_dir=self.cfg.baseline_cache,
                                   timeout_s=self.cfg.eval_timeout_s, run_dir=self.run_dir,
                                   evaluator=self.cfg.evaluator, use_bwrap=self.cfg.use_bwrap)
        log(f"baseline: valid={summary['valid']} score={summary['score']} "
            f"cached={summary['cached']}")

    def _is_copy_of_base(self, sid: int) -> bool:
        sub, copy = self.subs[sid], self.copy_path(sid)
        if sub.get("tensors_hash") is None and copy.exists():   # resumed: hash the copy again
            sub["tensors_hash"] = weights_fingerprint(copy)
        return self.base.is_copy(sub["weights_hash"], sub.get("tensors_hash"))

    def _baseline_result(self) -> dict[str, Any] | None:
        path = self.paths.baseline_result
        if path.is_file():
            try:
                data = read_result(path)
                if data.get("valid") and data.get("score") is not None:
                    return data
            except (OSError, ValueError):
                return None
        return None

    def _evaluate(self, sid: int) -> None:
        sub = self.subs[sid]
        copy = self.copy_path(sid)
        weights_hash = sub["weights_hash"]
        if not copy.exists():  # e.g. a journal from before the grader kept its own copies
            self._finish(sid, {"score": None, "valid": False, "error": (
                f"the grader's copy of {sub['model_path']} is missing; submit it again"),
                "code": SubmissionError.MODEL_DELETED.value})
            return
        # Identical weights are scored once.
        with self.lock:
            earlier = next((s for s in sorted(self.subs) if s < sid
                            and self.subs[s].get("weights_hash") == weights_hash
                            and self.subs[s]["status"] == "scored"), None)
        if earlier is not None:
            src = self.paths.result(earlier)
            result = read_result(src)
            self._finish(sid, {**result_summary(result), "duplicate_of": earlier,
                               "elapsed_s": 0.0}, result=result)
            return
        if weights_hash == self.base.folder_fingerprint():
            base = self._baseline_result()
            if base is not None:
                self._finish(sid, {**result_summary(base), "duplicate_of": "baseline",
                                   "copy_of_base": True, "elapsed_s": 0.0}, result=base)
                return
        log(f"submission {sid}: evaluating {sub['model_path']} (the grader's copy {copy})")
        outcome = run_evaluation(
            self.cfg.evaluator_command(), grader_cfg_path=self._grader_cfg_file(), model=copy,
            heldout=Path(self.cfg.heldout) if self.cfg.heldout else Path(os.devnull),
            backend=self.cfg.backend, out_path=self.paths.eval_dir / f"{sid}.json",
            timeout_s=self.cfg.eval_timeout_s,
            log_path=self.paths.eval_dir / f"{sid}.log", slot=self.slot,
            use_bwrap=self.cfg.use_bwrap)
        result = outcome.result
        if outcome.error is not None:
            result = {"score": None, "ci95": None, "n_items": 0, "items": [], "metrics": {},
                      "valid": False, "error": outcome.error, "elapsed_s": outcome.elapsed_s}
        summary = result_summary(result)
        if outcome.error is not None:
            summary["code"] = eval_failure_code(outcome.returncode, timed_out=(
                outcome.returncode is None and outcome.elapsed_s > 0)).value
        summary["elapsed_s"] = round(outcome.elapsed_s, 3)
        if summary["valid"]:
            provenance = self._provenance(copy)
            result = {**result, "provenance": provenance}
            if provenance is not None and provenance.get("not_derived") is None:
                # never scored unchecked: intake let through only weights the check reads, so
                # this is the grader's own failure (a disk error, the base gone), said as such
                summary.update(valid=False, score=None, ci95=None,
                               code=SubmissionError.INTERNAL_ERROR.value,
                               error=f"the provenance check could not run "
                                     f"({provenance.get('error')}); the submission is not "
                                     "scored, submit it again")
        self._finish(sid, summary, result=result)

    def _checks_provenance(self) -> bool:
        """Whether submissions are checked against the base (provenance.py): a base model with
        safetensors weights the check reads. A stand-in base without (tests) has no check."""
        if self._base_checkable is None:
            from a2c.runtime.grader_service.provenance import base_is_checkable
            self._base_checkable = base_is_checkable(self.cfg.base_model)
        return self._base_checkable

    def _provenance(self, copy: Path) -> dict[str, Any] | None:
        """The submission against the base model (provenance.py); None without a base the
        check reads. A check that cannot run is recorded with `not_derived` None and its error:
        the caller then does not score the submission."""
        if not self._checks_provenance():
            return None
        try:
            from a2c.runtime.grader_service.provenance import check_provenance  # numpy: lazy
            return check_provenance(copy, self.cfg.base_model)
        except Exception as exc:  # noqa: BLE001 - recorded; the submission is not scored
            log(f"provenance check failed: {exc}")
            return {"not_derived": None, "reasons": [], "error": str(exc)}

    def _finish(self, sid: int, summary: dict[str, Any],
                result: dict[str, Any] | None = None) -> None:
        summary.setdefault("duplicate_of", None)
        if not summary["valid"]:
            summary.setdefault("code", SubmissionError.INTERNAL_ERROR.value)
        if summary.get("copy_of_base") is None:
            summary["copy_of_base"] = self._is_copy_of_base(sid)
        if self.base.template_ignored(self.copy_path(sid)):
            summary["metrics"] = {**(summary.get("metrics") or {}),
                                  "chat_template_ignored": True}
        path = self.paths.result(sid)
        rel = path.relative_to(self.paths.root).as_posix()
        full = dict(result or {"score": None, "valid": False, "error": summary.get("error")})
        full.update(submission_id=sid, weights_hash=self.subs[sid]["weights_hash"],
                    duplicate_of=summary["duplicate_of"], valid=summary["valid"],
                    error=summary.get("error"), copy_of_base=summary["copy_of_base"])
        if (summary.get("metrics") or {}).get("chat_template_ignored"):
            full["template_ignored"] = True
            full["metrics"] = {**(full.get("metrics") or {}), "chat_template_ignored": True}
        not_derived = (full.get("provenance") or {}).get("not_derived") if summary["valid"] \
            else None
        write_bytes_atomic(path, canonical_json(full), mode=PRIVATE_FILE)
        scored = JournalScored(
            id=sid, ts=utc_now(), score=summary.get("score"), ci95=summary.get("ci95"),
            valid=summary["valid"], error=summary.get("error"), code=summary.get("code"),
            duplicate_of=summary["duplicate_of"], copy_of_base=summary["copy_of_base"],
            elapsed_s=summary.get("elapsed_s"), backend=summary.get("backend"),
            metrics=summary.get("metrics") or {}, result=rel, not_derived=not_derived)
        entry = scored.to_dict()
        self.journal.append(entry)
        with self.lock:
            sub = self.subs[sid]
            sub.update({k: v for k, v in entry.items() if k not in ("op", "ts", "id")})
            sub["scored_at"] = entry["ts"]
            sub["status"] = "scored" if summary["valid"] else "invalid"
        self.events.emit(SubmissionScored(
            id=sid, score=scored.score, ci95=scored.ci95, valid=scored.valid, error=scored.error,
            code=scored.code, duplicate_of=scored.duplicate_of, copy_of_base=scored.copy_of_base,
            elapsed_s=scored.elapsed_s, backend=scored.backend, not_derived=not_derived))
        if not summary["valid"] or summary["duplicate_of"] is not None:
            _remove(self.copy_path(sid))   # never evaluated again
        self._prune()   # valid copies that can no longer count (pruning.py)
        log(f"submission {sid}: {sub['status']} score={entry['score']} "
            f"{'dup of ' + str(entry['duplicate_of']) if entry['duplicate_of'] else ''}"
            f"{entry['error'] or ''}")

    def _prune(self) -> None:
        """Remove the copies no policy can count any more; each one a `submission_pruned` event
        (the journal keeps its hash)."""
        with self.lock:
            doomed = prunable(self.subs, self.copy_path)
        for sid in doomed:
            copy = self.copy_path(sid)
            size = tree_bytes(copy)
            _remove(copy)
            self.events.emit(SubmissionPruned(id=sid, weights_hash=self.subs[sid]["weights_hash"],
                                              bytes=size))
            log(f"submission {sid}: the grader's copy removed ({size} bytes); it can no longer "
                "count (neither the best nor the last valid submission)")

    # ------------------------------------------------------------------ shutdown
    def stop(self, kill_running: bool = False) -> None:
        with self.lock:
            self.stopping = True
            self.cond.notify_all()
        if kill_running:
            self.slot.kill()

    def join(self, timeout: float | None = None) -> None:
        if self.worker.is_alive():
            self.worker.join(timeout)
