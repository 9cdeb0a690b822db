"""The error codes the grader service gives: one home for every code a client or a record sees.

Two families share the namespace:
- refusals: a request the service turns away (HTTP status + `{"error": code, ...}`); nothing is
  journaled;
- invalid submissions: a received submission that could not be scored; the code is written in the
  journal's `scored` entry and in the `submission_scored` event (`code`), next to the message.
`a2c.analysis.failures` sorts failures by these codes.
"""

from __future__ import annotations

from enum import Enum


class SubmissionError(str, Enum):
    """A code; `str` so that `SubmissionError.TOO_SOON == "too_soon"` and it serialises as is."""

    # Refusals (HTTP status in REFUSAL_STATUS).
    BAD_REQUEST = "bad_request"
    PATH_ESCAPE = "path_escape"
    NOT_FOUND = "not_found"
    UNAUTHORIZED = "unauthorized"
    TOO_SOON = "too_soon"
    SUBMISSION_LIMIT = "submission_limit"
    DEADLINE_PASSED = "deadline_passed"
    UNAVAILABLE = "unavailable"
    NOT_REGULAR_FILE = "not_regular_file"    # a symlink, FIFO, device or socket in the folder
    SPARSE_FILE = "sparse_file"              # a file with far fewer blocks than its size
    SUBMISSION_TOO_LARGE = "submission_too_large"  # over max_submission_bytes / _files
    PICKLE_WEIGHTS = "pickle_weights"        # a pickle-format file (.bin, .pt, .pth, .ckpt, .pkl)
    UNLOADED_WEIGHTS = "unloaded_weights"    # a weight file the evaluator would not load
    UNREADABLE_WEIGHTS = "unreadable_weights"  # a loaded file or dtype the provenance check cannot read
    # Invalid submissions (journal `scored` entries with valid = false).
    # The grader evaluates its own copy (made at submit), so these three no longer arise; they
    # stay for journals written before it did.
    MODEL_MOVED = "model_moved"              # now resolves outside the output folder
    MODEL_DELETED = "model_deleted"          # gone before it was evaluated (or its copy is)
    MODEL_CHANGED = "model_changed"          # weights changed after submission
    EVAL_TIMEOUT = "eval_timeout"            # the evaluation ran past eval_timeout_s
    EVAL_KILLED = "eval_killed"              # the evaluator was killed by SIGKILL (out of memory?)
    EVAL_CRASHED = "eval_crashed"            # the evaluator exited non-zero or by another signal
    EVAL_NO_RESULT = "eval_no_result"        # it exited 0 without a readable result
    GRADER_INVALID = "grader_invalid"        # the grader marked the result invalid (says why)
    INTERNAL_ERROR = "internal_error"        # a bug in the service's bookkeeping

    def __str__(self) -> str:
        return self.value


REFUSAL_STATUS: dict[SubmissionError, int] = {
    SubmissionError.BAD_REQUEST: 400, SubmissionError.PATH_ESCAPE: 400,
    SubmissionError.NOT_FOUND: 404, SubmissionError.UNAUTHORIZED: 401,
    SubmissionError.TOO_SOON: 409, SubmissionError.SUBMISSION_LIMIT: 429,
    SubmissionError.DEADLINE_PASSED: 410, SubmissionError.UNAVAILABLE: 503,
    SubmissionError.NOT_REGULAR_FILE: 400, SubmissionError.SPARSE_FILE: 400,
    SubmissionError.SUBMISSION_TOO_LARGE: 413, SubmissionError.PICKLE_WEIGHTS: 400,
    SubmissionError.UNLOADED_WEIGHTS: 400, SubmissionError.UNREADABLE_WEIGHTS: 400,
}
REFUSALS = tuple(REFUSAL_STATUS)
INVALID_SUBMISSION = tuple(c for c in SubmissionError if c not in REFUSAL_STATUS)
CODES = tuple(c.value for c in SubmissionError)


def eval_failure_code(returncode: int | None, timed_out: bool) -> SubmissionError:
    """The code of an evaluation that produced no usable result, from how the child ended."""
    import signal

    if timed_out:
        return SubmissionError.EVAL_TIMEOUT
    if returncode is not None and returncode < 0 and -returncode == signal.SIGKILL:
        return SubmissionError.EVAL_KILLED
    if returncode == 0:
        return SubmissionError.EVAL_NO_RESULT
    return SubmissionError.EVAL_CRASHED
