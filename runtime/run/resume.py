"""Continue a run after a crash of the runtime or the grader."""

from __future__ import annotations

from pathlib import Path

from a2c.contracts.events import read_events, verify_events
from a2c.contracts.record_key import load_signing_key
from a2c.contracts.run_info import ENDED, GpuPlacement, RunInfo, RunStatus
from a2c.contracts.run_paths import RunPaths
from a2c.errors import RunError
from a2c.runtime.run.context import Reporter, RunContext
from a2c.runtime.run.grader import kill_stale
from a2c.runtime.run.runner import Runner
from a2c.runtime.run.scoring import pending


def resume(run_dir: str | Path, report: Reporter = print, gpus: str | None = None,
           grader_gpus: str | None = None) -> dict:
    """The grader restarts on the same journal (it re-queues unscored submissions), the event chain
    continues with `run_resumed`, the agent is relaunched only if budget remains (the deadline
    does not move), and the run is finalised.
    """
    run_dir = Path(run_dir).resolve()
    paths = RunPaths(run_dir)
    if not paths.run_json.is_file():
        raise RunError(f"{run_dir}: not a run directory (no run.json)")
    run = RunInfo.read(paths.run_json)
    if run.status in ENDED:
        raise RunError(f"{run_dir}: the run already ended ({run.status}); nothing to resume")
    # With the operator's key: a chain re-signed or re-hashed by someone else is refused here,
    # before the runtime appends to it.
    check = verify_events(paths.events, load_signing_key())
    if not check.ok and check.events == 0 and not paths.events.exists():
        pass
    elif not check.ok:
        raise RunError(f"{paths.events}:{check.bad_line}: {check.reason}; "
                       "the record was altered, refusing to resume")
    kill_stale(run_dir, run)
    if gpus is not None or grader_gpus is not None:   # a sweep's new placement: Ray's ids now
        from a2c.runtime.run import devices
        record = run.gpus or GpuPlacement()      # None until the run holds devices
        assigned, lease = devices.assign(
            gpus if gpus is not None else ",".join(record.agent) or "none",
            grader_gpus if grader_gpus is not None else ",".join(record.grader) or "none", 0)
        devices.register(run_dir, lease)
        run.gpus = assigned
    ctx = RunContext(run_dir, run)
    started = any(e["type"] == "run_started" for e in read_events(paths.events)) \
        if paths.events.exists() else False
    run.resumes = int(run.resumes or 0) + 1
    run.status = RunStatus.RUNNING
    ctx.save()
    runner = Runner(ctx, report)
    if started:
        runner.event("run_resumed", {"resume": run.resumes,
                                     "pending": pending(run_dir),
                                     "deadline": run.deadline,
                                     "agent_exit": run.agent_exit and run.agent_exit.to_dict()})
        report(f"resuming {run.run_id} (resume #{run.resumes})")
    return runner.go(resumed=started)
