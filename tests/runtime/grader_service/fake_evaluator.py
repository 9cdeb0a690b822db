"""A stand-in for `python -m a2c.runtime.grader_service.evaluate_one` in the service's plumbing tests.

Behaviour is read from files in the model folder: SLEEP (seconds), SCORE (number), CRASH (exit
with an error), INVALID (a result with valid false), HANG (sleep forever). Every start appends the
model path to $FAKE_EVAL_LOG so tests can count evaluations.
"""

import argparse
import os
import sys
import time
from pathlib import Path

from a2c.runtime.grader_service.evaluate_one import _die_with_parent, _write_atomic

p = argparse.ArgumentParser()
for name in ("--grader", "--model", "--heldout", "--engine", "--out"):
    p.add_argument(name, required=True)
p.add_argument("--parent-pid", type=int)
a = p.parse_args()
_die_with_parent(a.parent_pid)
model = Path(a.model)
if os.environ.get("FAKE_EVAL_LOG"):
    with open(os.environ["FAKE_EVAL_LOG"], "a") as log:
        log.write(f"{model}\n")
if (model / "SLEEP").exists():
    time.sleep(float((model / "SLEEP").read_text()))
if (model / "HANG").exists():
    time.sleep(3600)
if (model / "CRASH").exists():
    sys.stderr.write("Traceback (most recent call last):\n"
                     "OSError: Unable to load weights from model\n")
    sys.exit(1)
score = float((model / "SCORE").read_text()) if (model / "SCORE").exists() else 50.0
valid = not (model / "INVALID").exists()
_write_atomic(Path(a.out), {
    "score": score, "ci95": [max(0, score - 10), min(100, score + 10)], "n_items": 5,
    "items": [{"id": "h1", "prompt": "SECRET-HELDOUT", "gold": "42"}],
    "metrics": {"accuracy": score / 100}, "grader": "fake", "grader_version": "1",
    "backend": a.engine, "elapsed_s": 0.01, "valid": valid,
    "error": None if valid else "grader said no"})
