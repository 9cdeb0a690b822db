"""A level-1 task authored the way docs/authoring.md says: one YAML file and JSONL data in a
folder of its own, no Python. The data is the issue's own case: code words to write in capital
letters, graded case-sensitively on `Answer: <WORD>` (not the arithmetic task's `#### N`)."""

from __future__ import annotations

import json
import random
from pathlib import Path

SPEC = """\
apiVersion: a2c/v1
kind: Task
id: {task_id}
title: Code words in capitals
level: 1
description: "Write each code word in capital letters, as 'Answer: <WORD>'."
base_model: {{builtin: smollm2-135m-instruct}}
data:
  source:
    files: {{train: data/{task_id}/train.jsonl, test: data/{task_id}/test.jsonl}}
  agent: {{split: train}}
  heldout: {{split: test}}
  fields: {{id: id, prompt: question, answer: word}}
grader:
  kind: exact_match
  params:
    pattern: '{pattern}'
    fallback: none
    normalize: {normalize}
  inference:
    prompt_template: "{{prompt}}\\nReply with 'Answer: <WORD>'."
    max_new_tokens: 16
    temperature: 0
    batch_size: 100
budget: {{wall_clock: 7m, gpus: 0, max_submissions: 10, min_interval: 0s, eval_timeout: 10m}}
scoring: {{policy: best}}
"""

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def code_words(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    words: list[str] = []
    seen = set()
    while len(words) < n:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def record(i: int, word: str, answer: str | None = None) -> dict:
    return {"id": f"w{i}", "question": f"Write the code word {word} in capital letters.",
            "word": word.upper() if answer is None else answer}


def write_task(root: Path, *, task_id: str = "codewords", train: list[dict] | None = None,
               test: list[dict] | None = None, pattern: str = r"Answer:\s*([A-Za-z]+)",
               normalize: str = "none", n_train: int = 400, n_test: int = 100) -> Path:
    """specs/tasks/<id>.yaml + data/<id>/{train,test}.jsonl under `root`; returns the spec."""
    if train is None or test is None:
        words = code_words(n_train + n_test)
        records = [record(i, w) for i, w in enumerate(words)]
        train = records[:n_train] if train is None else train
        test = records[n_train:] if test is None else test
    tasks = root / "specs" / "tasks"
    data = tasks / "data" / task_id
    data.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        (data / f"{name}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    spec = tasks / f"{task_id}.yaml"
    spec.write_text(SPEC.format(task_id=task_id, pattern=pattern, normalize=normalize),
                    encoding="utf-8")
    return spec
