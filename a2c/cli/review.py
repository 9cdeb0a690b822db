"""`a2c review RUN --driver D`, and the driver plumbing `a2c report --narrate` shares with it:
a gateway for the analysis in a folder of its own (RUN/analysis/calls/<what>-<UTC time>/, with
its own budget and record of every call), the analysis run through it, its outputs written to
RUN/analysis/ with the driver, model, tokens and cost. Nothing is written to the run's signed
record; nothing half-done is written when the model or the budget fails, and a failed attempt
removes its gateway folder (and RUN/analysis/calls/, RUN/analysis/ when it made them)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from a2c.cli.run import _positive


def add_driver_flags(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--driver", required=required, default=None,
                   help="the model that writes the analysis: provider/model (e.g. "
                        "anthropic/claude-sonnet-4-5) or scripted:NAME|PATH (a scripted driver)")
    p.add_argument("--driver-tokens", type=_positive(int), metavar="N", default=None,
                   help="budget of the analysis: tokens (input + output)")
    p.add_argument("--driver-cost", type=_positive(float), metavar="USD", default=None,
                   help="budget of the analysis: cost in USD (by the gateway's price table)")


def run_analysis(run_dir: Path, args: argparse.Namespace, what: str,
                 analyse: Callable[[Path, Any, Callable], dict]) -> tuple[dict[str, Any], dict]:
    """Build the report, run `analyse(run_dir, report, ask)` through a fresh gateway and
    write RUN/analysis/<what>.{json,md,html}; returns (the doc, the paths)."""
    from a2c.analysis.narrate import analysis_dir, write_outputs
    from a2c.analysis.report import checked_report
    from a2c.analysis.verify import VerificationError, verify_run
    from a2c.runtime.driver_gateway.session import analysis_gateway

    verification = verify_run(run_dir)          # a case study of a record that fails is none
    if not verification.ok and not getattr(args, "force", False):
        raise VerificationError(f"{run_dir}: the run record failed verification: "
                                f"{verification.first}; refusing to analyse it (run `a2c "
                                "verify` for details)")
    report = checked_report(run_dir, verification)
    budget = {"driver_tokens": args.driver_tokens, "driver_cost_usd": args.driver_cost}
    made, folder = _call_folder(analysis_dir(run_dir), what)
    try:
        with analysis_gateway(folder, args.driver, budget) as gw:
            doc = analyse(run_dir, report, gw.ask)
        t = gw.totals
        doc.update(driver=args.driver, model=gw.model, wire=gw.wire,
                   usage={k: t.get(k, 0) for k in ("calls", "input_tokens", "output_tokens",
                                                    "tokens", "cost_usd")},
                   gateway_record=str(folder.relative_to(run_dir)),
                   record_verified=verification.ok,
                   written_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        return doc, write_outputs(run_dir, doc, what)
    except BaseException:
        # A failed attempt (the model's answer unusable, a spent budget, a refusal, Ctrl-C)
        # leaves nothing behind: its gateway folder, and the folders made for it, go.
        shutil.rmtree(folder, ignore_errors=True)
        for path in made:
            _rmdir(path)
        raise


def _call_folder(out: Path, what: str) -> tuple[list[Path], Path]:
    """(the folders made on the way, innermost first; a new RUN/analysis/calls/<what>-<UTC time>
    folder, suffixed -2, -3, ... when one of that second exists, so that an attempt never shares
    (nor, failing, deletes) another's record)."""
    from a2c.fsutil import private_dir, private_run_dir
    made = [p for p in (out / "calls", out) if not p.exists()]
    private_run_dir(out.parent)              # private by default (a2c.fsutil): 0700
    private_dir(out)
    private_dir(out / "calls")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1, 1000):
        folder = out / "calls" / (f"{what}-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            folder.mkdir()
            return made, folder
        except FileExistsError:
            continue
    raise FileExistsError(f"{out / 'calls'}: no free folder name for {what}-{stamp}")


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()                            # only when empty: another attempt's stays
    except OSError:
        pass


def _summary(doc: dict[str, Any], what: str) -> str:
    from a2c.analysis.citations import Tally

    c, u = Tally.from_dict(doc["checked"]), doc["usage"]
    false = f"{c.false} FALSE (the record contradicts them), " if c.false else ""
    return (f"{what}: {c.verified} of {c.claims} verified against the record, "
            f"{false}{c.unverifiable} unverifiable · {doc['model']} · {u['tokens']} tokens · "
            f"${u['cost_usd']:.4f}")


def narrate_run(run_dir: Path, args: argparse.Namespace) -> None:
    from a2c.analysis.narrate import narrate

    doc, paths = run_analysis(run_dir, args, "narrative", narrate)
    for path in paths.listed:
        print(path)
    print(_summary(doc, "case study"), file=sys.stderr)


def _review(args: argparse.Namespace) -> int:
    from a2c.analysis.report import write_report
    from a2c.analysis.review import review

    run_dir = Path(args.run_dir)
    doc, paths = run_analysis(run_dir, args, "review", review)
    write_report(run_dir)                       # the report shows the review
    for path in paths.listed:
        print(path)
    for v in doc["verdicts"]:
        print(f"{v['rule']:18} {v['verdict']:10} {v['status']}"
              + (f" ({v['why']})" if v["status"] != "verified" else ""), file=sys.stderr)
    print(_summary(doc, "review"), file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "review", help="an LLM rule review of a run, every verdict's evidence checked",
        description="A driver model reads a digest of the run's record (events, submissions, "
                    "commands, code at each submission, agent steps) and gives a verdict per "
                    "rule (held-out data, grader tampering, another model, the mode's limits) "
                    "with citations; each citation is checked against the record, and a "
                    "verdict the record contradicts is marked FALSE whatever it cites. Written to RUN/analysis/review.{json,md,html} "
                    "(outside the signed record) and shown in the report.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    add_driver_flags(p, required=True)
    p.set_defaults(handler=_review)
