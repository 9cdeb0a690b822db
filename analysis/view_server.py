"""The server of `a2c view --serve`: the pages of a runs folder (analysis/view.py), rebuilt on
every request, behind a token, on loopback unless `--public` accepts another address.

Three routes, each rendered by a2c: `/` (the page), `/runs/<id>/report` (the report page of an
ended run, `<id>` one of analysis/view.py `served_runs`, opened without following any symlink)
and `/leaderboard`. Nothing of a run directory besides its report page is reachable. Every
request must carry the random token printed at start (`?token=...`, compared in constant time;
the page's links carry it): without it the answer is 403, whatever the path. The command
(a2c/cli/view.py) parses its arguments and calls `serve`.
"""

from __future__ import annotations

import hmac
import http.server
import ipaddress
import re
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from a2c.errors import A2CError

REPORT_ROUTE = re.compile(r"/runs/([^/]+)/report")
CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


# ----------------------------------------------------------------------------- addresses
def is_loopback(host: str) -> bool:
    """Every address `host` names is a loopback address (127.0.0.0/8, ::1)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return False
    try:
        return bool(infos) and all(
            ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)
    except ValueError:
        return False


def check_host(host: str, public: bool) -> None:
    if not host or not is_loopback(host):
        if not public:
            raise A2CError(f"--host {host!r} is not a loopback address: the runs' pages would "
                           "be reachable from the network; pass --public to accept that (the "
                           "token is still required)")


# ----------------------------------------------------------------------------- the pages
@dataclass(frozen=True)
class Site:
    """What the server serves: the runs folder, whether it writes the missing reports first,
    and the token every request must carry (`query` is it as the links' query string)."""

    runs_dir: Path
    reports: bool
    secret: bytes
    query: str

    def authorised(self, split, authorization: str) -> bool:
        given = parse_qs(split.query, keep_blank_values=True).get("token", [])
        if authorization.startswith("Bearer "):
            given = [*given, authorization[len("Bearer "):].strip()]
        return len(given) == 1 and hmac.compare_digest(
            given[0].encode("utf-8", "replace"), self.secret)

    def page(self, path: str) -> bytes | None:
        """The HTML of a route, None for a path that is not one (404)."""
        from a2c.analysis.leaderboard import build_leaderboard, render_leaderboard
        from a2c.analysis.view import (
            has_report_page,
            read_report_page,
            render_view,
            served_runs,
            write_missing_reports,
        )

        if path in ("/", "/index.html"):
            if self.reports:
                write_missing_reports(self.runs_dir)
            allowed = served_runs(self.runs_dir)

            def link(run_dir: Path, run_id: str) -> str | None:
                return f"/runs/{quote(run_id, safe='')}/report{self.query}" \
                    if run_id in allowed and has_report_page(run_dir) else None

            return render_view(self.runs_dir, link=link,
                               leaderboard_href=f"/leaderboard{self.query}").encode("utf-8")
        if path == "/leaderboard":
            return render_leaderboard(build_leaderboard(self.runs_dir), "html").encode("utf-8")
        match = REPORT_ROUTE.fullmatch(path)
        if match:
            run_id = unquote(match.group(1))
            if run_id in served_runs(self.runs_dir):
                return read_report_page(self.runs_dir, run_id)
        return None


class ViewHandler(http.server.BaseHTTPRequestHandler):
    """One request: the token first (403 without it, whatever the path), then the route."""

    server_version = "a2c-view"
    sys_version = ""

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8",
              head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy", CSP)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _page(self, head: bool) -> None:
        site: Site = self.server.site  # type: ignore[attr-defined]
        try:
            split = urlsplit(self.path)
        except ValueError:
            split = None
        if split is None or not site.authorised(split, self.headers.get("Authorization", "")):
            self._send(403, b"forbidden: open the URL a2c view printed (with its token)\n",
                       head=head)
            return
        body = site.page(split.path)
        if body is None:
            self._send(404, b"not found\n", head=head)
        else:
            self._send(200, body, "text/html; charset=utf-8", head)

    def do_GET(self):  # noqa: N802 - http.server's name
        self._page(head=False)

    def do_HEAD(self):  # noqa: N802
        self._page(head=True)

    def log_message(self, *_args):
        pass


# ----------------------------------------------------------------------------- the server
def make_server(runs_dir: Path, host: str = "127.0.0.1", port: int = 0, *, reports: bool = True,
                public: bool = False, token: str | None = None):
    """(server, url): a ThreadingHTTPServer bound to (host, port) serving the pages of
    `runs_dir`, not yet started (`serve_forever`), and the URL to open (with the token)."""
    check_host(host, public)
    token = token or secrets.token_urlsafe(32)
    query = f"?token={quote(token, safe='')}"
    site = Site(Path(runs_dir).resolve(), reports, token.encode("ascii"), query)
    family = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)[0][0] if host \
        else socket.AF_INET

    class Server(http.server.ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

    httpd = Server((host, port), ViewHandler)
    httpd.site = site  # type: ignore[attr-defined]
    shown = f"[{host}]" if ":" in host else host
    return httpd, f"http://{shown}:{httpd.server_address[1]}/{query}"


def serve(runs_dir: Path, host: str, port: int, reports: bool = True, public: bool = False,
          token: str | None = None) -> None:
    """Serve the pages of `runs_dir` until Ctrl-C (make_server)."""
    httpd, url = make_server(runs_dir, host, port, reports=reports, public=public, token=token)
    with httpd:
        print(f"a2c view: {url} (Ctrl-C to stop)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
