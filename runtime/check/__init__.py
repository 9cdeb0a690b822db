"""`a2c check`: the author's gate, on a compiled task bundle (the CLI compiles the spec first, so
the check sees it as it is now). Like Harbor's oracle run and Terminal-Bench's task check, it
proves the task with its real grader, one numbered point per line.

  (1) the gold answers, written in the task's answer format, score 100 through the real grader
      (level 3: the expert walkthroughs played in the real environment win; humaneval: the
      canonical solutions pass their tests) — `points`;
  (2) empty and corrupted answers score 0 — `points`;
  (3) the agent and held-out splits are disjoint (ids and contents); their sizes are printed —
      `points`;
  (4) the base model is scored (the cached baseline of `a2c run`) — `agent`;
  (5) with an agent, it runs under a short budget in the check's own runs folder
      (`.a2c/check-runs/`, never `runs/`), and its gain over the baseline is printed with the
      paired 95% interval `a2c report` gives, said in words with its likely cause, read from the
      per-item results: the answer format not learnt, the format learnt but not the skill, a
      real gain that is small for the budget — `agent`, `diagnose`.

A failed point is one FAIL line saying what to fix; a WARN line passes with a reason to read;
what cannot run on this machine (a judge without its endpoint, data not downloaded) is a SKIP
line saying why (`report`: exit 0 passed, 1 a point failed, 3 not checkable here). `gate` runs
the points in order.
"""

from a2c.runtime.check.agent import DEFAULT_BUDGET, AgentCheck, check_runs_dir
from a2c.runtime.check.gate import check_bundle
from a2c.runtime.check.report import EXIT_CANNOT_CHECK, EXIT_FAILED, Report

__all__ = ["DEFAULT_BUDGET", "EXIT_CANNOT_CHECK", "EXIT_FAILED", "AgentCheck", "Report",
           "check_bundle", "check_runs_dir"]
