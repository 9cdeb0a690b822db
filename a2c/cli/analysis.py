"""`a2c verify`, `a2c keys`, `a2c report`, `a2c leaderboard`: integrity checks, the record
signing key, run reports, leaderboards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from a2c.analysis.formats import LEADERBOARD_FORMATS


def _verify(args: argparse.Namespace) -> int:
    from a2c.analysis.verify import OPERATOR_KEY, verify_run
    from a2c.contracts.record_key import load_legacy_key, load_public_key
    from a2c.errors import A2CError

    keys: list = []
    for path in args.public_key or []:
        keys.append(load_public_key(path))          # an unreadable key given is an error
    if not args.public_key:
        keys.append(OPERATOR_KEY)
    if args.key_file:
        legacy = load_legacy_key(args.key_file)
        if legacy is None:
            raise A2CError(f"{args.key_file}: no such key file")
        keys.append(legacy)
    if (Path(args.run_dir) / "export.json").is_file():   # an unpacked `a2c export --public`
        from a2c.analysis.export import verify_exported
        verify_run = verify_exported  # noqa: N806 - withheld files named, the rest checked
    result = verify_run(Path(args.run_dir), key=keys, allow_unauthenticated=args.no_key)
    for check in result.checks:
        print(f"{'ok  ' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    if result.ok and not result.authenticated:
        print(f"{args.run_dir}: record verified, NOT AUTHENTICATED ({result.auth_note})")
        return 0
    if result.ok and result.legacy:
        print(f"{args.run_dir}: record verified and authenticated (legacy HMAC, key "
              f"{result.key_id})")
        return 0
    if result.ok:
        print(f"{args.run_dir}: record verified and authenticated (Ed25519, key "
              f"{result.key_id})")
        return 0
    print(f"{args.run_dir}: record FAILED verification", file=sys.stderr)
    for problem in result.problems:
        print(f"  {args.run_dir.rstrip('/')}/{problem}", file=sys.stderr)
    return 3


def _keys(args: argparse.Namespace) -> int:
    from a2c.contracts import record_key as rk
    from a2c.fsutil import write_bytes_atomic

    if args.rotate:
        old, key = rk.rotate_operator_key()
        if old is not None:
            print(f"retired key {old.id}: its public key stays trusted in "
                  f"{rk.trusted_keys_dir() / (old.id + rk.PUBLIC_SUFFIX)}")
    elif args.init:
        key = rk.operator_key()
    else:
        key = rk.load_signing_key()
    status = rk.record_key_status()
    if key is None:
        print(f"no record signing key at {status.path} (made on the first run, or: a2c keys "
              "--init)", file=sys.stderr)
        return 1
    public = key.public
    if args.export:
        write_bytes_atomic(args.export, public.pem(), mode=0o644)
        print(args.export)
        return 0
    print(f"key id       {public.id} (Ed25519)")
    print(f"private key  {status.path} ({'mode ok' if status.mode_ok else 'MODE NOT 0600'}; "
          "keep it secret)")
    print(f"public key   {rk.public_key_file()}")
    older = [p.name for p in sorted(rk.trusted_keys_dir().glob("*" + rk.PUBLIC_SUFFIX))] \
        if rk.trusted_keys_dir().is_dir() else []
    if older:
        print(f"older keys   {', '.join(older)} (in {rk.trusted_keys_dir()}, still trusted)")
    sys.stdout.write(public.pem().decode("ascii"))
    return 0


def _report(args: argparse.Namespace) -> int:
    from a2c.analysis.report import write_report

    if args.narrate:                        # the case study first: the report then shows it
        from a2c.cli.review import narrate_run
        from a2c.errors import A2CError
        if not args.driver:
            raise A2CError("--narrate needs --driver provider/model or scripted:NAME")
        narrate_run(Path(args.run_dir), args)
    report, paths = write_report(Path(args.run_dir), args.out, force=args.force)
    if not report["verification"]["ok"]:
        print(f"WARNING: {args.run_dir}: the record FAILED verification; the report is marked "
              f"UNVERIFIED (--force)", file=sys.stderr)
    for path in paths.listed:
        print(path)
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
    for excluded in board.excluded:
        print(f"excluded {excluded.path}: {excluded.reason}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "verify", help="check a run record's integrity (hash chain, signatures, bundle, journal, "
                       "results)",
        description="Check the hash chain of events.jsonl and every event's Ed25519 signature "
                    "(with the public key only: the operator's by default, or --public-key), "
                    "run.json against the events, the agent split's fingerprint, every sealed "
                    "file (run.json, journal, results, logs, rendered prompt, data) against the "
                    "record's seal, the bundle digest, that the grader's journal and the events "
                    "agree and that results files match. Exits non-zero naming the first broken "
                    "line or file.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--public-key", metavar="FILE", action="append", default=None,
                   help="a public key the record may be signed with (PEM, as `a2c keys --export` "
                        "writes it); repeat for several (older keys after a rotation). Default: "
                        "the operator's public keys (~/.config/a2c/record.ed25519.pub and "
                        "record-keys/*.pub)")
    p.add_argument("--key-file", metavar="FILE", default=None,
                   help="the HMAC key file of a legacy record (one whose events carry `mac`, "
                        "written before the signatures; ~/.config/a2c/record.key); such a record "
                        "is said to be authenticated (legacy HMAC)")
    p.add_argument("--no-key", action="store_true",
                   help="accept a record whose chain is intact but cannot be authenticated "
                        "(its key is not here, or a legacy record); said in the output")
    p.set_defaults(handler=_verify)

    p = subparsers.add_parser(
        "keys", help="the operator's record signing key: its id and public key (to publish)",
        description="Show the operator's record signing key (Ed25519): its id, where the "
                    "private key is (0600, never shared) and the public key, which anyone needs "
                    "to verify records (`a2c verify RUN --public-key FILE`). The key pair is "
                    "made on the first run (or --init). --rotate retires the current key: its "
                    "public key stays trusted (record-keys/<id>.pub) so older records verify.")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--init", action="store_true", help="make the key pair if there is none")
    group.add_argument("--rotate", action="store_true",
                       help="make a new key pair; keep the old public key, delete the old "
                            "private key")
    p.add_argument("--export", metavar="FILE", default=None,
                   help="write the public key (PEM) to FILE instead of printing it")
    p.set_defaults(handler=_keys)

    p = subparsers.add_parser(
        "report", help="write report.json, report.md and a self-contained report.html for a run",
        description="Verify a run and write its report (report.json, report.md, "
                    "score_over_time.svg, report.html) to --out (default RUN_DIR/report).")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output folder (default: RUN_DIR/report)")
    p.add_argument("--force", action="store_true",
                   help="report a run whose record fails verification (marked UNVERIFIED)")
    p.add_argument("--narrate", action="store_true",
                   help="also write a case study by --driver (strategy, turning points, failure "
                        "modes, what would have helped), every claim checked against the record: "
                        "RUN/analysis/narrative.{json,md,html}")
    from a2c.cli.review import add_driver_flags
    add_driver_flags(p, required=False)
    p.set_defaults(handler=_report)

    p = subparsers.add_parser(
        "leaderboard", help="one table across runs: baseline, best, improvement, spread",
        description="Aggregate every run under RUNS_DIR (folders holding run.json) into one "
                    "table; only verified runs count unless --include-unverified.")
    p.add_argument("runs_dir", metavar="RUNS_DIR")
    p.add_argument("--by", default="agent,driver,task,mode",
                   help="grouping keys, comma-separated (agent, driver, task, mode, level, seed, "
                        "isolation, budget, model, agent_params); default agent,driver,task,mode. "
                        "agent is added when missing (a row is always one agent's). Runs are also "
                        "split by any budget, base model or agent settings that differ, never "
                        "pooled; the budget is always a column")
    p.add_argument("--format", choices=LEADERBOARD_FORMATS, default="md")
    p.add_argument("--out", metavar="FILE", default=None, help="write here instead of stdout")
    p.add_argument("--include-unverified", action="store_true",
                   help="count runs whose record fails verification")
    p.set_defaults(handler=_leaderboard)
