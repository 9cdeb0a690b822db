"""`a2c export RUN --public`: a shareable archive of a run (analysis/export.py), verifiable with
`a2c verify` on the unpacked folder and the operator's public key."""

from __future__ import annotations

import argparse

from a2c.errors import A2CError


def _export(args: argparse.Namespace) -> int:
    from a2c.analysis.export import export_public

    if not args.public:
        raise A2CError("only public exports exist: pass --public (held-out items, gold answers, "
                       "grader files, tokens and keys left out)")
    path, manifest = export_public(args.run_dir, args.out)
    print(f"wrote {path}")
    for name, entry in manifest.withheld.items():
        print(f"  withheld {name}: {entry['reason']}")
    for name, entry in manifest.rewritten.items():
        print(f"  rewritten {name}: {entry['reason']}")
    for name, symbols in manifest.host_paths_kept.items():
        print(f"  note: {name} names host folders ({', '.join(symbols)}) in fields the signed "
              "events hold; it cannot be rewritten")
    left = manifest.snapshot_files_left_out
    print(f"  snapshots: {manifest.snapshots or 'not included'}"
          + (f" ({len(left)} file(s) left out: {', '.join(list(left)[:5])}"
             f"{', ...' if len(left) > 5 else ''})" if left else ""))
    print(f"  export.json signed by key {manifest.key}")
    print("verify: tar xzf the archive, then `a2c verify FOLDER --public-key OPERATOR.pub`")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="a shareable archive of a run (--public: no held-out items, no secrets)",
        description="Write RUN as a .tar.gz anyone can verify with the operator's public key: "
                    "the signed event chain, run.json, journal, logs, agent split, bundles, "
                    "trajectory, the report without item examples and the code snapshots (a git "
                    "bundle of the files the contamination scan reads). Held-out and final "
                    "items, gold answers (results/*.json), grader files, the grader token and "
                    "the gateway key (in any encoding) are left out, host folders named "
                    "symbolically ($RUNS/<id>, $HOME, ...). export.json, signed with the "
                    "operator's record key, lists every file with its digest and every withheld "
                    "or rewritten file with its sealed digest; `a2c verify` of the unpacked "
                    "folder checks every file against it and names what was withheld.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--public", action="store_true", help="leave out held-out items and secrets "
                                                         "(required)")
    p.add_argument("--out", metavar="FILE", default=None,
                   help="the archive to write (default: ./<run-id>.public.tar.gz)")
    p.set_defaults(handler=_export)
