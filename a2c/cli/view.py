"""`a2c view RUNS_DIR`: one page over every run of a folder (analysis/view.py), written once or
served and rebuilt on every request (analysis/view_server.py), so a sweep can be watched in a
browser.

Served, it shows pages, never files. Three routes, each rendered by a2c: `/` (the page),
`/runs/<id>/report` (the report page of an ended run, `<id>` one of analysis/view.py
`served_runs`, opened without following any symlink) and `/leaderboard`. Nothing of a run
directory besides its report page is reachable: not grader/, driver/, results/, the events, the
workspace. Every request must carry the random token printed at start (`?token=...`, compared in
constant time; the page's links carry it): without it the answer is 403, whatever the path. The
server listens on loopback unless `--public` accepts another address.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from a2c.errors import A2CError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "view", help="one page over all runs of a folder (status, scores, reports, leaderboard)",
        description="Write RUNS_DIR/index.html — every trial or run with its status and scores, a "
                    "link to its report, the leaderboard — or, with --serve, serve it and "
                    "rebuild it on each request; while a sweep runs, the page reloads itself. "
                    "Served, only rendered pages are reachable (the page, each ended run's "
                    "report, the leaderboard), never a file of the folder, and only with the "
                    "random token in the URL printed at start (http://127.0.0.1:PORT/?token=...). "
                    "It listens on loopback; another --host needs --public.")
    p.add_argument("runs_dir", metavar="RUNS_DIR")
    p.add_argument("--serve", action="store_true", help="serve the page (and the run reports) "
                                                        "instead of writing it once")
    p.add_argument("--port", type=int, default=8765, help="port of --serve (default 8765)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address of --serve (default 127.0.0.1); an address that is not "
                        "loopback is refused unless --public")
    p.add_argument("--public", action="store_true",
                   help="allow a --host that is not loopback (others on the network can reach "
                        "the server; the token is still required)")
    p.add_argument("--no-reports", action="store_true",
                   help="do not write the missing report/ of ended runs")
    p.add_argument("--out", metavar="FILE", help="where to write the page "
                                                 "(default RUNS_DIR/index.html)")
    p.set_defaults(handler=handle_view)


def handle_view(args: argparse.Namespace) -> int:
    from a2c.analysis.view import write_missing_reports, write_view
    runs_dir = Path(args.runs_dir).resolve()
    if not runs_dir.is_dir():
        raise A2CError(f"{runs_dir}: no such directory")
    if not args.serve:
        if not args.no_reports:
            write_missing_reports(runs_dir)
        print(write_view(runs_dir, Path(args.out) if args.out else None))
        return 0
    from a2c.analysis.view_server import serve
    serve(runs_dir, args.host, args.port, reports=not args.no_reports, public=args.public)
    return 0
