"""`a2c view RUNS_DIR`: one page over every run of a folder (analysis/view.py), written once or
served on loopback and rebuilt on every request, so a sweep can be watched in a browser."""

from __future__ import annotations

import argparse
from pathlib import Path

from a2c.errors import A2CError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "view", help="one page over all runs of a folder (status, scores, reports, leaderboard)",
        description="Write RUNS_DIR/index.html — every trial or run with its status and scores, a "
                    "link to its report, the leaderboard — or, with --serve, serve it on "
                    "127.0.0.1 and rebuild it on each request; while a sweep runs, the page "
                    "reloads itself.")
    p.add_argument("runs_dir", metavar="RUNS_DIR")
    p.add_argument("--serve", action="store_true", help="serve the page (and the run reports) "
                                                        "instead of writing it once")
    p.add_argument("--port", type=int, default=8765, help="port of --serve (default 8765)")
    p.add_argument("--host", default="127.0.0.1", help="address of --serve (default loopback)")
    p.add_argument("--no-reports", action="store_true",
                   help="do not write the missing report/ of ended runs")
    p.add_argument("--out", metavar="FILE", help="where to write the page "
                                                 "(default RUNS_DIR/index.html)")
    p.set_defaults(handler=handle_view)


def handle_view(args: argparse.Namespace) -> int:
    from a2c.analysis.view import render_view, write_missing_reports, write_view
    runs_dir = Path(args.runs_dir).resolve()
    if not runs_dir.is_dir():
        raise A2CError(f"{runs_dir}: no such directory")
    if not args.serve:
        if not args.no_reports:
            write_missing_reports(runs_dir)
        print(write_view(runs_dir, Path(args.out) if args.out else None))
        return 0
    serve(runs_dir, args.host, args.port, reports=not args.no_reports, render=render_view,
          reports_fn=write_missing_reports)
    return 0


def serve(runs_dir: Path, host: str, port: int, reports: bool, render, reports_fn) -> None:
    """The page at `/` (rebuilt per request), the folder's files (run reports) below it."""
    import functools
    import http.server

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path in ("/", "/index.html"):
                if reports:
                    reports_fn(runs_dir)
                body = render(runs_dir).encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)
                return
            super().do_GET()

        def log_message(self, *_args):
            pass

    handler = functools.partial(Handler, directory=str(runs_dir))
    with http.server.ThreadingHTTPServer((host, port), handler) as httpd:
        print(f"a2c view: http://{host}:{httpd.server_address[1]}/ (Ctrl-C to stop)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
