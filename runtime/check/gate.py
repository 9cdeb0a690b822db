"""`a2c check` on a compiled task bundle: points (1)-(5) in order, each a line of the report;
a point that cannot run here, or whose input failed above, is a SKIP line saying why."""

from __future__ import annotations

from pathlib import Path

from a2c.runtime.check.agent import AgentCheck, check_agent, check_baseline
from a2c.runtime.check.points import check_points_1_to_3
from a2c.runtime.check.report import Report


def check_bundle(report: Report, bundle, work: Path, agent: AgentCheck | None = None,
                 no_baseline: bool = False) -> None:
    """Prove the task of `bundle` (a2c.contracts.bundle.Bundle) with its real grader; scratch
    files go to `work` (the caller removes it); with `agent`, point (5) runs it."""
    from a2c.contracts.service_config import GRADER_JSON, read_grader_json
    from a2c.contracts.spec import GraderSpec

    task = bundle.task
    grader_json = bundle.root / GRADER_JSON
    grader_cfg = read_grader_json(grader_json) if grader_json.is_file() else task.grader.to_dict()
    grader = GraderSpec.from_dict(grader_cfg)
    print(f"a2c check {task.id}: level {task.level}, "
          f"grader {grader.kind or None}, bundle {bundle.root}", flush=True)
    splits = check_points_1_to_3(report, task, grader, bundle.root, work)
    baseline = None
    if report.cannot_check:
        report.skip("(4)(5):", "not run: the task cannot run on this machine (above)")
    elif splits is None or report.failed:
        report.skip("(4)(5):", "not run: fix the points above first")
    elif no_baseline:
        report.skip("(4)(5):", "not run (--no-baseline)")
    else:
        baseline = check_baseline(report, task, bundle.root, grader_cfg, splits.heldout, work)
    if agent is None:
        return
    if baseline is None:
        if "(4)(5):" not in report.skipped:
            report.skip("(5) agent:", "not run: it needs the baseline of point (4)")
        return
    check_agent(report, agent, bundle.root, baseline, str(grader.kind or None))
