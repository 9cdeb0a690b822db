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
from a2c.contracts.grade_result import ResultHeader
from a2c.contracts.journal import Journal, JournalReceived, JournalScored
from a2c.contracts.provenance import Provenance
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import ServiceConfig
from a2c.contracts.submission_errors import SubmissionError
from a2c.fsutil import PRIVATE_FILE, private_dir, write_bytes_atomic
from a2c.runtime.grader_service.base_ref import BaseReference
from a2c.runtime.grader_service.common import Refusal, log  # noqa: F401 - the server's API
from a2c.runtime.grader_service.intake import _remove, copy_submission
from a2c.runtime.grader_service.limits import Limits, check_limits, current_limits
from a2c.runtime.grader_service.model_path import resolve_model_path
from a2c.runtime.grader_service.pruning import prunable, tree_bytes
from a2c.runtime.grader_service.scoring import Scorer
from a2c.runtime.grader_service.submission import (
    QUEUED,
    RUNNING,
    Submission,
    replay,
)
from a2c.runtime.grader_service.weights import weights_fingerprint


class GraderService:
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
        self.subs: dict[int, Submission] = {}
        self.queue: list[int] = []
        self.running: int | None = None
        self.last_received_unix: float | None = None
        self.stopping = False
        self.snapshotter = None
        if cfg.snapshots and cfg.workspace is not None and Path(cfg.workspace).is_dir():
            from a2c.contracts.outside import outside_roots
            from a2c.runtime.snapshots import Snapshotter

            self.snapshotter = Snapshotter(self.paths.snapshots, cfg.workspace,
                                           event_log=self.events,
                                           outside=outside_roots(self.paths))
        self.base = BaseReference(cfg.base_model)
        self.scorer = Scorer(cfg, self.paths, self.base)
        self.slot = self.scorer.slot
        self._replay()
        self.worker = threading.Thread(target=self._work, name="grader-worker", daemon=True)

    # ------------------------------------------------------------------ resume
    def _replay(self) -> None:
        self.subs = replay(self.journal.read())
        received = [s.received.received_unix for s in self.subs.values()
                    if isinstance(s.received.received_unix, (int, float))]
        self.last_received_unix = max(received, default=None)
        self.queue = sorted(sid for sid, sub in self.subs.items() if sub.status == QUEUED)
        if self.subs:
            log(f"resumed from the journal: {len(self.subs)} submissions, "
                f"{len(self.queue)} to (re)evaluate")

    def next_id(self) -> int:
        return max(self.subs, default=0) + 1

    # ------------------------------------------------------------------ limits
    def limits(self, now: float | None = None) -> Limits:
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
        model_path, note = _submit_request(body)
        with self.lock:
            self._check_limits(time.time())
        shown, host = self.resolve_model_path(model_path)
        with self.intake_lock:  # copies and hashes never run side by side
            with self.lock:
                self._check_limits(time.time())  # one accepted while this one waited
            incoming = self.paths.submissions / f".incoming-{secrets.token_hex(8)}"
            intake = copy_submission(host, self.output_dir, incoming, shown=shown,
                                     limit=self.cfg.agent_output_dir,
                                     max_bytes=self.cfg.max_submission_bytes,
                                     max_files=self.cfg.max_submission_files,
                                     check_weights=self.scorer.checks_provenance())
            try:
                with self.lock:
                    now = time.time()
                    self._check_limits(now)  # again: the limits may have changed meanwhile
                    sid = self.next_id()
                    target = self.copy_path(sid)
                    _remove(target)   # left by a crash between the rename and the journal
                    os.rename(incoming, target)
                    received = JournalReceived(id=sid, ts=utc_now(), received_unix=now,
                                               model_path=shown, host_path=str(host),
                                               weights_hash=intake.folder_hash, note=note)
                    self.journal.append(received)  # durable before anything else happens
                    self.subs[sid] = Submission(received=received,
                                                tensors_hash=intake.weights_hash)
                    self.last_received_unix = now
                    self.events.emit(SubmissionReceived(id=sid, model_path=shown,
                                                        weights_hash=intake.folder_hash,
                                                        note=note))
                    self.queue.append(sid)
                    position = len(self.queue) + (1 if self.running is not None else 0)
                    self.cond.notify_all()
            finally:
                _remove(incoming)   # gone already unless refused after the copy
        snapshot = self._snapshot(sid)
        left = self.limits(now).submissions_left
        log(f"submission {sid} received: {shown} ({intake.folder_hash[:12]}; {intake.files} "
            f"files, {intake.bytes} bytes copied and hashed in {intake.elapsed_s:.3f} s)")
        return {"id": sid, "status": QUEUED, "weights_hash": intake.folder_hash,
                "queue_position": position, "submissions_left": left, "snapshot": snapshot}

    def _snapshot(self, sid: int) -> str | None:
        """The workspace's commit at submission `sid`, tagged (None without a snapshotter)."""
        if self.snapshotter is None:
            return None
        try:
            commit = self.snapshotter.snapshot("submission", submission_id=sid)["commit"]
            self.snapshotter.tag_submission(sid, commit)
        except Exception as exc:  # a snapshot failure never costs the agent its submission
            log(f"snapshot for submission {sid} failed: {exc}")
            return None
        with self.lock:
            self.subs[sid].snapshot = commit
        return commit

    # ------------------------------------------------------------------ queries
    def public(self, sub: Submission) -> dict[str, Any]:
        position = None
        if sub.status == QUEUED and sub.id in self.queue:
            position = self.queue.index(sub.id) + 1 + (1 if self.running is not None else 0)
        return sub.public(position)

    def get(self, sid: int) -> dict[str, Any]:
        with self.lock:
            if sid not in self.subs:
                raise Refusal(404, "not_found", f"no submission with id {sid}",
                              limit=max(self.subs, default=0))
            return self.public(self.subs[sid])

    def list(self) -> dict[str, Any]:
        with self.lock:
            ordered = [self.subs[s] for s in sorted(self.subs)]
            valid = [s for s in ordered if s.status == "scored" and s.score is not None]
            best = max(valid, key=lambda s: (s.score, -s.id), default=None)
            limits = self.limits()
            return {"submissions": [self.public(s) for s in ordered],
                    "best": {"id": best.id, "score": best.score} if best else None,
                    "submissions_left": limits.submissions_left,
                    "remaining_s": limits.remaining_s}

    def idle(self) -> bool:
        with self.lock:
            return not self.queue and self.running is None

    # ------------------------------------------------------------------ worker
    def start(self) -> None:
        self.worker.start()

    def copy_path(self, sid: int) -> Path:
        """The grader's copy of submission `sid` (made at submit; what is evaluated)."""
        return self.paths.submissions / str(sid)

    def _work(self) -> None:
        if self.cfg.baseline:
            try:
                self.scorer.run_baseline()
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
                self.subs[sid].status = RUNNING
            try:
                self._evaluate(sid)
            except Exception as exc:  # bookkeeping bug: record, keep serving
                log(f"submission {sid}: internal error:\n{traceback.format_exc()}")
                self._record_internal_error(sid, exc)
            finally:
                with self.lock:
                    self.running = None
                    self.cond.notify_all()

    def _record_internal_error(self, sid: int, exc: Exception) -> None:
        try:
            self._finish(sid, JournalScored(valid=False, error=f"internal grader error: {exc}",
                                            code=SubmissionError.INTERNAL_ERROR.value))
        except Exception:  # e.g. the disk is full: stays unscored, re-queued on resume
            log(f"submission {sid}: could not record the error:\n{traceback.format_exc()}")
            with self.lock:
                self.subs[sid].fail_unrecorded(
                    f"internal grader error, not recorded (re-evaluated on resume): {exc}")

    def _is_copy_of_base(self, sid: int) -> bool:
        sub, copy = self.subs[sid], self.copy_path(sid)
        if sub.tensors_hash is None and copy.exists():   # resumed: hash the copy again
            sub.tensors_hash = weights_fingerprint(copy)
        return self.base.is_copy(sub.weights_hash, sub.tensors_hash)

    def _evaluate(self, sid: int) -> None:
        sub = self.subs[sid]
        with self.lock:   # identical weights are scored once
            earlier = next((s for s in sorted(self.subs) if s < sid
                            and self.subs[s].weights_hash == sub.weights_hash
                            and self.subs[s].status == "scored"), None)
        outcome, result = self.scorer.score(sid, sub.model_path, sub.weights_hash,
                                            self.copy_path(sid), earlier)
        self._finish(sid, outcome, result=result)

    def _finish(self, sid: int, outcome: JournalScored,
                result: dict[str, Any] | None = None) -> None:
        """Record `outcome`: results/<n>.json (the full result), the journal's scored line, the
        `submission_scored` event; then drop the copies that can no longer count."""
        if not outcome.valid and outcome.code is None:
            outcome.code = SubmissionError.INTERNAL_ERROR.value
        if outcome.copy_of_base is None:
            outcome.copy_of_base = self._is_copy_of_base(sid)
        template_ignored = self.base.template_ignored(self.copy_path(sid))
        if template_ignored:
            outcome.metrics = {**(outcome.metrics or {}), "chat_template_ignored": True}
        path = self.paths.result(sid)
        full = dict(result or {"score": None, "valid": False, "error": outcome.error})
        full.update(submission_id=sid, weights_hash=self.subs[sid].weights_hash,
                    duplicate_of=outcome.duplicate_of, valid=outcome.valid,
                    error=outcome.error, copy_of_base=outcome.copy_of_base)
        if template_ignored:
            full.update(template_ignored=True, metrics={
                **(ResultHeader.of(full).metrics or {}), "chat_template_ignored": True})
        write_bytes_atomic(path, canonical_json(full), mode=PRIVATE_FILE)
        outcome.id, outcome.ts = sid, utc_now()
        outcome.metrics = outcome.metrics or {}
        outcome.result = path.relative_to(self.paths.root).as_posix()
        outcome.not_derived = _not_derived(full) if outcome.valid else None
        self.journal.append(outcome)
        with self.lock:
            sub = self.subs[sid]
            sub.record(outcome)
        self.events.emit(SubmissionScored(
            id=sid, score=outcome.score, ci95=outcome.ci95, valid=outcome.valid,
            error=outcome.error, code=outcome.code, duplicate_of=outcome.duplicate_of,
            copy_of_base=outcome.copy_of_base, elapsed_s=outcome.elapsed_s,
            backend=outcome.backend, not_derived=outcome.not_derived))
        if not outcome.valid or outcome.duplicate_of is not None:
            _remove(self.copy_path(sid))   # never evaluated again
        self._prune()   # valid copies that can no longer count (pruning.py)
        log(f"submission {sid}: {sub.status} score={outcome.score} "
            f"{'dup of ' + str(outcome.duplicate_of) if outcome.duplicate_of else ''}"
            f"{outcome.error or ''}")

    def _prune(self) -> None:
        """Remove the copies no policy can count any more; each one a `submission_pruned` event
        (the journal keeps its hash)."""
        with self.lock:
            doomed = prunable(self.subs, self.copy_path)
        for sid in doomed:
            copy = self.copy_path(sid)
            size = tree_bytes(copy)
            _remove(copy)
            self.events.emit(SubmissionPruned(id=sid, weights_hash=self.subs[sid].weights_hash,
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


def _submit_request(body: Any) -> tuple[Any, str]:
    """(model_path, note) of a POST /submit body, or a Refusal saying what is wrong."""
    if not isinstance(body, dict):
        raise Refusal(400, "bad_request", "the request body must be a JSON object "
                      "{\"model_path\": ..., \"note\": ...}")
    if "model_path" not in body:
        raise Refusal(400, "bad_request", "missing field: model_path", field="model_path")
    note = body.get("note")
    if note is not None and not isinstance(note, str):
        raise Refusal(400, "bad_request", "note must be a string", field="note")
    return body["model_path"], (note or "")[:2000]


def _not_derived(result: dict[str, Any]) -> bool | None:
    """The provenance check's verdict in a results file (None: no check, or it could not run)."""
    provenance = ResultHeader.of(result).provenance
    return Provenance.from_dict(provenance).not_derived if isinstance(provenance, dict) else None
