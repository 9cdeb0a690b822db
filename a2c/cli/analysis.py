"""`a2c verify`, `a2c report`, `a2c leaderboard`: integrity checks, run reports, leaderboards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from a2c.analysis.formats import LEADERBOARD_FORMATS


def _verify(args: argparse.Namespace) -> int:
    from a2c.analysis.verify import verify_run

    result = verify_run(Path(args.run_dir), key=args.key_file or "operator",
                        allow_unauthenticated=args.no_key)
    for check in result.checks:
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    if result.ok and not result.authenticated:
        print(f"{args.run_dir}: record verified, NOT AUTHENTICATED ({result.auth_note})")
        return 0
    if result.ok:
        print(f"{args.run_dir}: record verified and authenticated")
        return 0
    print(f"{args.run_dir}: record FAILED verification", file=sys.stderr)
    for problem in result.problems:
        print(f"  {args.run_dir.rstrip('/')}/{problem}", file=sys.stderr)
    return 3


def _report(args: argparse.Namespace) -> int:
    from a2c.analysis.report import write_report

    report, paths = write_report(Path(args.run_dir), args.out, force=args.force)
    if not report["verification"]["ok"]:
        print(f"WARNING: {args.run_dir}: the record FAILED verification; the report is marked "
              f"UNVERIFIED (--force)", file=sys.stderr)
    for kind in ("json", "md", "html"):
        print(paths[kind])
    scores = report["scores"]
    print(f"baseline {scores['baseline']} · best {scores['best']} · "
          f"{report['metrics']['n_submissions']} submissions", file=sys.stderr)
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from a2c.analysis.leaderboard import build_leaderboard, render_leaderboard
    from a2c.fsutil import write_text_atomic

    by = tuple(k.strip() for k in args.by.split(",") if k.strip())
    board = build_leaderboard(Path(args.runs_dir), by, args.include_unverified)
    text = render_leaderboard(board, args.format)
    if args.out:
        write_text_atomic(args.out, text)
        print(args.out)
    else:
        sys.stdout.write(text)
    for excluded in board["excluded"]:
        print(f"excluded {excluded['path']}: {excluded['reason']}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "verify", help="check a run record's integrity (hash chain, bundle, journal, results)",
        description="Check the hash chain of events.jsonl and its authentication under the "
                    "operator's record key, run.json against the events, the agent split's "
                    "fingerprint, every sealed file (run.json, journal, results, logs, rendered "
                    "prompt, data) against the record's seal, the bundle digest, that the grader's "
                    "journal and the events agree and that results files match. Exits non-zero "
                    "naming the first broken line or file.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--key-file", metavar="FILE", default=None,
                   help="the record key (default: $A2C_RECORD_KEY_FILE or "
                        "~/.config/a2c/record.key)")
    p.add_argument("--no-key", action="store_true",
                   help="accept a record whose chain is intact but cannot be authenticated "
                        "(its key is not here, or a legacy record); said in the output")
    p.set_defaults(handler=_verify)

    p = subparsers.add_parser(
        "report", help="write report.json, report.md and a self-contained report.html for a run",
        description="Verify a run and write its report (report.json, report.md, "
                    "score_over_time.svg, report.html) to --out (default RUN_DIR/report).")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output folder (default: RUN_DIR/report)")
    p.add_argument("--force", action="store_true",
                   help="report a run whose record fails verification (marked UNVERIFIED)")
    p.set_defaults(handler=_report)

    p = subparsers.add_parser(
        "leaderboard", help="one table across runs: baseline, best, improvement, spread",
        description="Aggregate every run under RUNS_DIR (folders holding run.json) into one "
                    "table; only verified runs count unless --include-unverified.")
    p.add_argument("runs_dir", metavar="RUNS_DIR")
    p.add_argument("--by", default="agent,driver,task,mode",
                   help="grouping keys, comma-separated (agent, driver, task, mode, level, seed, "
                        "isolation); default agent,driver,task,mode")
    p.add_argument("--format", choices=LEADERBOARD_FORMATS, default="md")
    p.add_argument("--out", metavar="FILE", default=None, help="write here instead of stdout")
    p.add_argument("--include-unverified", action="store_true",
                   help="count runs whose record fails verification")
    p.set_defaults(handler=_leaderboard)
