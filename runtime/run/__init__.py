"""One run: prepare the run directory, start the grader, run the agent in a sandbox under the
budget guard, record everything, score the run by the task's policy. Resume after a crash.

    ctx = prepare(RunOptions(bundle="arith", agent="ref-sft"))     # RUN_DIR ready, nothing running
    summary = execute(ctx)                                          # baseline, agent, finalise
    summary = resume(run_dir)                                       # after a crash

Modules: `context` (RunOptions,
RunContext; the run directory's paths are `a2c.contracts.run_paths.RunPaths`), `resolve`
(which bundles and model), `prepare`, `runner` (Runner, execute) and its phases
(`scaffold_preflight`, `driver_link`, `task_services`, `supervise`, `run_snapshots`,
`progress`, `ending`), `agent` (the agent's sandbox spec, run_meta, transcript), `grader` (the
grader service process), `scoring` (scores from the journal), `resume`. The run's limits are
one `a2c.contracts.budget.Budget`. Re-exports only (imported eagerly: the functions
`prepare` and `resume` share their modules' names, and must win over them here).
"""

from a2c.contracts.run_info import RunInfo
from a2c.contracts.run_paths import RunPaths
from a2c.modes import MODES
from a2c.runtime.run.context import (
    READY_TIMEOUT_S,
    SNAPSHOT_EVERY_S,
    STOP_GRACE_S,
    Reporter,
    RunContext,
    RunOptions,
    versions,
)
from a2c.runtime.run.grader import GraderProcess
from a2c.runtime.run.prepare import prepare
from a2c.runtime.run.resolve import resolve_agent_bundle, resolve_task_bundle
from a2c.runtime.run.resume import resume
from a2c.runtime.run.runner import Runner, execute
from a2c.runtime.run.scoring import journal_state, score_run

__all__ = [
    "MODES", "READY_TIMEOUT_S", "SNAPSHOT_EVERY_S", "STOP_GRACE_S", "GraderProcess", "Reporter",
    "RunContext", "RunInfo", "RunOptions", "RunPaths", "Runner", "execute", "journal_state",
    "prepare", "resolve_agent_bundle", "resolve_task_bundle", "resume", "score_run", "versions",
]
