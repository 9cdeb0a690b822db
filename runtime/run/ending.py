"""How a run ends: its status, the scores on a final split, the secrets out of what the run
keeps, and the summary `a2c run` prints. The runner (runtime/run/runner.py:Runner.finish)
calls these in order once the agent is gone and the evaluations drained."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from a2c.contracts.run_info import UNSET, AgentExit, RunInfo, RunStatus
from a2c.contracts.run_paths import RunPaths
from a2c.runtime.redact import redact_file, redact_tree, remove_redact_file
from a2c.runtime.run.agent import log_tail
from a2c.runtime.run.context import Reporter
from a2c.runtime.run.driver import usage_summary
from a2c.runtime.run.reason import reason_line

# with a final split (scoring.final): the scores on the items the agent never got feedback on
FINAL_SPLIT_FIELDS = ("final_split_score", "final_split_baseline", "selection_gap")


def end_status(agent_exit: AgentExit | None, submissions: int,
               driver_spent: bool = False) -> RunStatus:
    """`agent_failed`: the agent exited non-zero on its own (not stopped at the deadline, and not
    after its driver budget was spent: a scaffold whose model stops answering exits non-zero,
    and that is the budget's end, not a failure); `no_submission`: it ended without one
    submission; else `finished`. An agent stopped past its disk budget failed, as one the
    kernel killed for memory."""
    if agent_exit is not None and agent_exit.reason == "disk_budget":
        return RunStatus.AGENT_FAILED
    if agent_exit is not None and agent_exit.failed_on_its_own and not driver_spent:
        return RunStatus.AGENT_FAILED
    if not submissions:
        return RunStatus.NO_SUBMISSION
    return RunStatus.FINISHED


def final_split_values(run: RunInfo) -> dict[str, Any]:
    """The final split's fields run.json holds (none without a final split)."""
    return {name: getattr(run, name) for name in FINAL_SPLIT_FIELDS
            if getattr(run, name) is not UNSET}


def score_final_split(run: RunInfo, paths: RunPaths, report: Reporter) -> None:
    """With a final split: the counted submission and the base model scored once on the
    final items (runtime/grader_service/final.py), into run.json; a failure is reported and
    leaves the run's feedback scores as they are."""
    if not paths.final_heldout.is_file():
        return
    report("scoring the final split (items the agent never got feedback on)")
    from a2c.runtime.grader_service.final import score_final_split as score
    try:
        out = score(paths.root, run.scoring_spec.policy) or {}
    except Exception as exc:  # noqa: BLE001 - the run is still scored on feedback
        report(f"final split scoring FAILED: {exc}")
        out = {}
    for name in FINAL_SPLIT_FIELDS:
        setattr(run, name, out.get(name))
    if run.final_split_score is not None:
        gap = run.selection_gap
        report(f"final split: {run.final_split_score:.1f} (baseline "
               f"{run.final_split_baseline}); selection gap "
               f"{'n/a' if gap is None else f'{gap:+.1f}'}")


def redact_logs(paths: RunPaths, secrets: dict[str, str], report: Reporter) -> None:
    """Secrets (passed keys, the grader token, the gateway key) out of logs/agent.log,
    logs/commands.log and the agent's folders the run keeps (runtime/redact.py); the values
    the snapshots used are removed with them."""
    for path in (paths.agent_log, paths.commands_log):
        try:
            if redact_file(path, secrets) > 0:
                report(f"redacted passed secret values from {path.name}")
        except OSError as exc:
            report(f"note: could not redact {path.name}: {exc}")
    for folder in (paths.workspace, paths.agent_home, paths.agent_tmp):
        if (found := redact_tree(folder, secrets))[0]:
            report(f"redacted secret values from {len(found[1])} file(s) of "
                   f"{folder.name}/: {', '.join(found[1][:5])}")
    remove_redact_file(paths.snapshots)


def release_temp_socket_dirs(paths: RunPaths) -> None:
    """After the services stopped: the short socket folders a long run path needed."""
    for folder in paths.temp_socket_dirs():
        shutil.rmtree(folder, ignore_errors=True)


def summary(run: RunInfo, run_dir: Path, driven: bool, secrets: dict[str, str]) -> dict:
    """What `a2c run` prints and returns (`driven`: the agent had a driver gateway)."""
    out: dict[str, Any] = {
        "run_id": run.run_id, "task": run.task, "agent": run.agent, "mode": run.mode,
        "isolation": run.isolation, "baseline_score": run.baseline_score,
        "best_score": run.best_score, "final_score": run.final_score,
        "submissions": run.submissions, "valid_submissions": run.valid_submissions,
        "status": run.status.value if isinstance(run.status, RunStatus) else run.status,
        "run_dir": str(run_dir), **final_split_values(run)}
    if driven:
        out["driver"] = run.driver
        out["driver_usage"] = usage_summary(run.driver_usage)
    if run.agent_log_tail is not None and run.status != RunStatus.FINISHED:
        out["agent_log_tail"] = run.agent_log_tail
        # one line (the last thing the agent said), never raw stream-json
        out["reason"] = reason_line(log_tail(RunPaths(run_dir).agent_log, secrets, 200,
                                             width=100_000)) \
            or reason_line(run.agent_log_tail)
    return out
