"""The `deepsearchqa` data generator: DeepSearchQA's questions in a fixed seeded split, every
record naming the frozen corpus copied beside the records."""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path


def read_questions(path: Path) -> list[dict]:
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split_questions(rows: list[dict], seed: int, train: int = 100, test: int = 200) -> dict:
    """The fixed split: rows shuffled with `random.Random(seed)`, first `train` / next `test`."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    if train + test > len(rows):
        raise ValueError(f"deepsearchqa: {train} + {test} questions asked, {len(rows)} available")
    return {"train": order[:train], "test": order[train:train + test]}


def generate(params: dict, seed: int, out_dir: Path) -> dict:
    """Records from DeepSearchQA's CSV (`problem, problem_category, answer, answer_type`).

    Params: `questions` (DSQA-full.csv or JSONL with the same columns), `corpus` (the frozen
    JSONL corpus, copied to `out_dir/corpus.jsonl`), `train` (100), `test` (200). `~` and
    `$VARS` in paths are expanded. Record ids are `dsqa-<row>`; every record names the corpus.
    """
    from a2c.runtime.data.generators import DataError

    def path_of(key):
        raw = params.get(key)
        if not raw:
            raise DataError(f"deepsearchqa generator: params.{key} is required")
        p = Path(os.path.expandvars(os.path.expanduser(str(raw))))
        if not p.is_file():
            raise DataError(f"deepsearchqa generator: {key} file not found: {p} (download "
                            "DSQA-full.csv from the google/deepsearchqa data set and build the "
                            "corpus; see docs/level3.md)")
        return p

    rows = read_questions(path_of("questions"))
    corpus = path_of("corpus")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "corpus.jsonl").write_bytes(corpus.read_bytes())
    try:
        idx = split_questions(rows, seed, int(params.get("train", 100)), int(params.get("test", 200)))
    except ValueError as exc:
        raise DataError(str(exc)) from None

    def rec(i):
        r = rows[i]
        return {"id": f"dsqa-{i}", "prompt": r.get("problem") or r.get("prompt") or "",
                "answer": r.get("answer"), "answer_type": r.get("answer_type") or "Single Answer",
                "problem_category": r.get("problem_category") or "", "corpus": "corpus.jsonl"}

    return {name: [rec(i) for i in ids] for name, ids in idx.items()}
