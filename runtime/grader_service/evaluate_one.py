"""Score one model in a child process: `python -m a2c.runtime.grader_service.evaluate_one ...`.

The grader service runs every evaluation here so that a model that fails to load, a CUDA error,
an out-of-memory kill or a hang costs one invalid submission, never the service. The result (a
full `GradeResult` as JSON) is written atomically to `--out`; exit status 0 means the file was
written (the result itself may say `valid: false`), anything else means the evaluation crashed and
the service records the tail of stderr as the error.

    python -m a2c.runtime.grader_service.evaluate_one --grader GRADER.json --model DIR \
        --heldout HELDOUT.jsonl --engine auto --out RESULT.json [--parent-pid PID]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from a2c.contracts.grade_result import GradeResult
from a2c.contracts.spec import GraderSpec


def _die_with_parent(parent_pid: int | None) -> None:
    """If the service is SIGKILLed mid-evaluation, this child must not linger holding the GPU."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # not Linux: best effort only
        pass
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(3)  # the parent died before prctl took effect


def _drop_ambient_caps() -> None:
    """In the evaluator's box (runtime/sandbox/evaluator_box.py) this process holds
    CAP_DAC_READ_SEARCH to read the held-out files; its children (HumanEval's bubblewrap for
    generated code, inference workers) must not inherit it: clear the ambient set."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    except Exception:  # not Linux, or an old kernel: nothing to clear
        pass


def _write_atomic(path: Path, data: dict) -> None:
    from a2c.fsutil import write_bytes_atomic
    write_bytes_atomic(path, json.dumps(data, ensure_ascii=False).encode("utf-8"),
                       mode=0o600)


def _invalid(error: str, grader_cfg: GraderSpec, engine: str, elapsed: float) -> dict:
    return GradeResult.invalid(grader_cfg.kind or "unknown", "unknown", engine, error,
                               elapsed_s=elapsed).to_dict()


def evaluate(grader_cfg: GraderSpec, model: str, heldout: str, engine: str) -> dict:
    """Score `model` on the held-out records; exceptions become an invalid result."""
    started = time.monotonic()
    try:
        from a2c.runtime.data import read_jsonl
        from a2c.runtime.graders import get_grader

        records = read_jsonl(heldout)
        if Path(model).is_dir():   # the files the loader reads: the ones provenance.py compares
            from a2c.runtime.grader_service.weight_files import resolve_weight_files
            resolve_weight_files(model)   # transformers and vLLM would read different files
        # files the records reference (level-3 game files) sit next to the held-out JSONL
        os.environ.setdefault("A2C_HELDOUT", str(Path(heldout).resolve()))
        grader = get_grader(grader_cfg)
        result = grader.grade_model(model, records, engine)
        data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    except Exception as exc:  # model fails to load, bad weights, grader error
        tb = traceback.format_exc(limit=3)
        sys.stderr.write(tb)
        message = f"{type(exc).__name__}: {exc}"
        return _invalid(message[:2000], grader_cfg, engine, time.monotonic() - started)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m a2c.runtime.grader_service.evaluate_one",
                                     description="Score one model (grader service child).")
    parser.add_argument("--grader", required=True, help="grader configuration JSON file")
    parser.add_argument("--model", required=True, help="model folder (host path)")
    parser.add_argument("--heldout", required=True, help="held-out records (JSONL)")
    parser.add_argument("--engine", default="auto",
                        help="inference engine: auto (the grader's), transformers, vllm")
    parser.add_argument("--out", required=True, help="where to write the GradeResult JSON")
    parser.add_argument("--parent-pid", type=int, default=None)
    parser.add_argument("--no-bwrap", action="store_true",
                        help="no bubblewrap for generated code (the run said --no-bwrap)")
    args = parser.parse_args(argv)
    if args.no_bwrap:
        from a2c.runtime.sandbox import bwrap
        bwrap.turn_off()
    _drop_ambient_caps()
    _die_with_parent(args.parent_pid)
    grader_cfg = GraderSpec.from_dict(json.loads(Path(args.grader).read_text(encoding="utf-8")))
    data = evaluate(grader_cfg, args.model, args.heldout, args.engine)
    _write_atomic(Path(args.out), data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
