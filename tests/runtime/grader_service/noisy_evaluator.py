"""A stand-in evaluator whose per-item verdicts are noise around a model's true quality.

The model folder holds QUALITY (the chance of a correct item, e.g. 0.6) and its weights file; an
item is correct when sha256(weights, item id) falls below QUALITY. So two submissions of the same
quality with different weights get different scores on the same items (selection noise), and the
same submission always gets the same verdicts (the test needs determinism, as the graders have).
"""

import argparse
import hashlib
import json
from pathlib import Path

from a2c.runtime.grader_service.evaluate_one import _die_with_parent, _write_atomic

p = argparse.ArgumentParser()
for name in ("--grader", "--model", "--heldout", "--engine", "--out"):
    p.add_argument(name, required=True)
p.add_argument("--parent-pid", type=int)
a = p.parse_args()
_die_with_parent(a.parent_pid)
model = Path(a.model)
quality = float((model / "QUALITY").read_text())
weights = (model / "model.safetensors").read_bytes()
items = []
for line in Path(a.heldout).read_text().splitlines():
    record = json.loads(line)
    draw = int(hashlib.sha256(weights + record["id"].encode()).hexdigest()[:8], 16) / 16 ** 8
    correct = draw < quality
    items.append({"id": record["id"], "correct": correct, "score": 1.0 if correct else 0.0})
score = 100.0 * sum(i["score"] for i in items) / len(items)
_write_atomic(Path(a.out), {
    "score": score, "ci95": [score, score], "n_items": len(items), "items": items,
    "metrics": {}, "grader": "noisy", "grader_version": "1", "backend": a.engine,
    "elapsed_s": 0.0, "valid": True, "error": None})
