"""Graders: score a submitted model (or a file of predictions) on a task's held-out records.

`get_grader(task["grader"])` returns the grader for the task's `grader.kind`. Kinds here:
`exact_match` (GSM8K-style numeric answers), `humaneval` (functional correctness; the programs
run in `code_exec`), `pairwise_judge` (AlpacaEval 2.0-style judged win rate; `judge` and its
`judge_*` modules); `rollout` (level 3) lives in `a2c.runtime.envs.rollout_grader` and is imported
only when asked for. The registry is `registry`.

A grader only ever sees the records it is given; callers pass the held-out split (the agent's split
only when explicitly asked, e.g. `a2c eval --split agent`).
"""

from a2c.contracts.grade_result import GradeResult
from a2c.runtime.graders.base import Grader, GraderError
from a2c.runtime.graders.bootstrap import bootstrap_ci
from a2c.runtime.graders.registry import GRADER_KINDS, get_grader, register

__all__ = [
    "GRADER_KINDS",
    "GradeResult",
    "Grader",
    "GraderError",
    "bootstrap_ci",
    "get_grader",
    "register",
]
