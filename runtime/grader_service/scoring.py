"""How the grader service scores one submission's copy: the outcome, before it is recorded.

Why apart from the queue (core.py): scoring is a pure decision over the copy and what is already
known (identical weights are scored once, a copy of the base model is the baseline, everything
else goes to the evaluator child and, when valid, through the provenance check), while the queue
owns the journal, the lock and the submissions. The service records what this returns
(`GraderService._finish`); the baseline runs here too, with the same evaluator.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from a2c.canonical import canonical_json
from a2c.contracts.grade_result import ResultHeader, read_result
from a2c.contracts.journal import JournalScored
from a2c.contracts.provenance import Provenance
from a2c.contracts.run_paths import RunPaths
from a2c.contracts.service_config import ServiceConfig
from a2c.contracts.submission_errors import SubmissionError, eval_failure_code
from a2c.fsutil import PRIVATE_FILE, write_bytes_atomic
from a2c.runtime.grader_service.base_ref import BaseReference
from a2c.runtime.grader_service.baseline import compute_baseline
from a2c.runtime.grader_service.common import log
from a2c.runtime.grader_service.evaluator import ProcessSlot, run_evaluation
from a2c.runtime.grader_service.submission import outcome_of
from a2c.runtime.inference.chat_template import SOURCE_KEY

Outcome = tuple[JournalScored, dict[str, Any] | None]   # what to journal, the results file


class Scorer:
    """The service's evaluator, baseline and provenance check over its configuration."""

    def __init__(self, cfg: ServiceConfig, paths: RunPaths, base: BaseReference):
        self.cfg, self.paths, self.base = cfg, paths, base
        self.slot = ProcessSlot()
        self._grader_cfg_path: Path | None = None
        self._base_checkable: bool | None = None   # provenance: see checks_provenance

    def grader_cfg_file(self) -> Path:
        """The grader section plus the chat template prompts are built with: the base model's,
        never the submission's (runtime/inference/chat_template.py)."""
        if self._grader_cfg_path is None:
            path = self.paths.grader_effective
            write_bytes_atomic(path, canonical_json({**self.cfg.grader_config().to_dict(),
                                                     SOURCE_KEY: self.base.template_source()}),
                               mode=PRIVATE_FILE)
            self._grader_cfg_path = path
        return self._grader_cfg_path

    # ------------------------------------------------------------------ the baseline
    def run_baseline(self) -> None:
        if self.paths.baseline_result.is_file():
            return
        if self.cfg.base_model is None or self.cfg.heldout is None:
            return
        summary = compute_baseline(task_id=self.cfg.resolved_task_id(),
                                   base_model=self.cfg.base_model,
                                   grader_cfg=self.cfg.grader_config(), heldout=self.cfg.heldout,
                                   engine=self.cfg.engine, cache_dir=self.cfg.baseline_cache,
                                   timeout_s=self.cfg.eval_timeout_s, run_dir=self.cfg.run_dir,
                                   evaluator=self.cfg.evaluator, use_bwrap=self.cfg.use_bwrap)
        log(f"baseline: valid={summary.valid} score={summary.score} cached={summary.cached}")

    def baseline_result(self) -> dict[str, Any] | None:
        """results/baseline.json when it holds a valid score."""
        path = self.paths.baseline_result
        if path.is_file():
            try:
                data = read_result(path)
                header = ResultHeader.of(data)
                if header.valid and header.score is not None:
                    return data
            except (OSError, ValueError):
                return None
        return None

    # ------------------------------------------------------------------ one submission
    def score(self, sid: int, model_path: str | None, weights_hash: str | None, copy: Path,
              earlier: int | None) -> Outcome:
        """The outcome of submission `sid` from its copy; `earlier`: a scored submission with
        the same weights, whose result it takes."""
        if not copy.exists():  # e.g. a journal from before the grader kept its own copies
            return JournalScored(valid=False, code=SubmissionError.MODEL_DELETED.value, error=(
                f"the grader's copy of {model_path} is missing; submit it again")), None
        if earlier is not None:   # identical weights are scored once
            result = read_result(self.paths.result(earlier))
            return self._taken(result, duplicate_of=earlier), result
        if weights_hash == self.base.folder_fingerprint():
            base = self.baseline_result()
            if base is not None:
                outcome = self._taken(base, duplicate_of="baseline")
                outcome.copy_of_base = True
                return outcome, base
        log(f"submission {sid}: evaluating {model_path} (the grader's copy {copy})")
        return self._evaluate(sid, copy)

    @staticmethod
    def _taken(result: dict[str, Any], duplicate_of: int | str) -> JournalScored:
        outcome = outcome_of(result)
        outcome.duplicate_of, outcome.elapsed_s = duplicate_of, 0.0
        return outcome

    def _evaluate(self, sid: int, copy: Path) -> Outcome:
        evaluation = run_evaluation(
            self.cfg.evaluator_command(), grader_cfg_path=self.grader_cfg_file(), model=copy,
            heldout=Path(self.cfg.heldout) if self.cfg.heldout else Path(os.devnull),
            engine=self.cfg.engine, out_path=self.paths.eval_dir / f"{sid}.json",
            timeout_s=self.cfg.eval_timeout_s,
            log_path=self.paths.eval_dir / f"{sid}.log", slot=self.slot,
            use_bwrap=self.cfg.use_bwrap)
        result = evaluation.result
        if evaluation.error is not None:
            result = {"score": None, "ci95": None, "n_items": 0, "items": [], "metrics": {},
                      "valid": False, "error": evaluation.error,
                      "elapsed_s": evaluation.elapsed_s}
        outcome = outcome_of(result)
        if evaluation.error is not None:
            outcome.code = eval_failure_code(evaluation.returncode, timed_out=(
                evaluation.returncode is None and evaluation.elapsed_s > 0)).value
        outcome.elapsed_s = round(evaluation.elapsed_s, 3)
        if outcome.valid:
            provenance = self.provenance(copy)
            result = {**result, "provenance": provenance.to_dict() if provenance else None}
            if provenance is not None and provenance.not_derived is None:
                # never scored unchecked: intake let through only weights the check reads, so
                # this is the grader's own failure (a disk error, the base gone), said as such
                outcome.valid, outcome.score, outcome.ci95 = False, None, None
                outcome.code = SubmissionError.INTERNAL_ERROR.value
                outcome.error = (f"the provenance check could not run "
                                 f"({provenance.error}); the submission is not scored, "
                                 "submit it again")
        return outcome, result

    # ------------------------------------------------------------------ provenance
    def checks_provenance(self) -> bool:
        """Whether submissions are checked against the base (provenance.py): a base model with
        safetensors weights the check reads. A stand-in base without (tests) has no check."""
        if self._base_checkable is None:
            from a2c.runtime.grader_service.provenance import base_is_checkable
            self._base_checkable = base_is_checkable(self.cfg.base_model)
        return self._base_checkable

    def provenance(self, copy: Path) -> Provenance | None:
        """The submission against the base model (provenance.py); None without a base the
        check reads. A check that cannot run is recorded with `not_derived` None and its error:
        the caller then does not score the submission."""
        if not self.checks_provenance():
            return None
        try:
            from a2c.runtime.grader_service.provenance import check_provenance  # numpy: lazy
            return check_provenance(copy, self.cfg.base_model)
        except Exception as exc:  # noqa: BLE001 - recorded; the submission is not scored
            log(f"provenance check failed: {exc}")
            return Provenance.failed(str(exc))
