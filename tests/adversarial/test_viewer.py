"""`a2c view --serve` shows pages, not files (issue 23, "the viewer serves the secrets").

The red team fetched grader/heldout.jsonl, grader/token, driver/gateway.key and results/ from
the viewer as another local user, and through a symlink the agent left in its workspace the
operator's record key and /etc/shadow. Here the real server runs on 127.0.0.1 (port 0, in a
thread, and once as the real command in a subprocess) over a runs folder holding all of those,
plus a symlinked run directory, a symlinked report folder and a symlinked report page; every such
path is requested — plain, with `..`, `%2e%2e`, `%2F`, double slashes, absolute paths and
absolute-form URLs, with and without the token — and no secret byte may come back. A report page
is served with the token, nothing without it, and a --host that is not loopback is refused
without --public.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from a2c.analysis.view import read_report_page, served_runs, write_missing_reports
from a2c.analysis.view_server import is_loopback, make_server
from a2c.cli import main
from a2c.contracts.record_key import operator_key, signing_key_file
from a2c.errors import A2CError

MAKER = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "make_fixture_run.py"
RUN = "arith-ref-sft-20261130-1200-beef"

SECRETS = {
    "heldout": b"SECRET-HELDOUT-7f3a91 the gold answer is 42",
    "token": b"SECRET-GRADER-TOKEN-c0ffee",
    "gateway": b"SECRET-GATEWAY-KEY-5eed",
    "results": b"SECRET-RESULTS-ITEM-d00d",
    "outside": b"SECRET-OUTSIDE-THE-RUNS-FOLDER-b0b",
    "outside_report": b"SECRET-REPORT-OUTSIDE-ca11",
    "log": b"SECRET-AGENT-LOG-f00d",
}


def _maker():
    spec = importlib.util.spec_from_file_location("a2c_make_fixture_run_viewer", MAKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> dict:
    """A runs folder with one honest ended run (its report written) and every secret a run
    directory holds, symlinks planted towards secrets outside, and three symlinked runs."""
    root = tmp_path_factory.mktemp("viewer")
    runs = root / "runs"
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRETS["outside"])
    run = _maker().make_run(runs / RUN)
    assert write_missing_reports(runs) == [run / "report" / "report.html"]
    (run / "grader" / "heldout.jsonl").write_bytes(SECRETS["heldout"] + b"\n")
    (run / "grader" / "token").write_bytes(SECRETS["token"])
    (run / "driver").mkdir(exist_ok=True)
    (run / "driver" / "gateway.key").write_bytes(SECRETS["gateway"])
    (run / "results" / "secret.json").write_bytes(SECRETS["results"])
    (run / "logs" / "agent.log").write_bytes(SECRETS["log"])
    # what an agent leaves in its workspace: links to the operator's keys, the outside, /etc
    ws = run / "workspace"
    (ws / "link").symlink_to(outside / "secret.txt")
    (ws / "key").symlink_to(signing_key_file())
    (ws / "shadow").symlink_to("/etc/shadow")
    (ws / "out").symlink_to(outside, target_is_directory=True)
    (runs / "top-link").symlink_to(outside / "secret.txt")
    # a run directory that is a symlink to a run outside the folder, with a report page there
    elsewhere = outside / "elsewhere-run"
    shutil.copytree(run, elsewhere, symlinks=True)
    (elsewhere / "report" / "report.html").write_bytes(SECRETS["outside_report"])
    (runs / "linked-run").symlink_to(elsewhere, target_is_directory=True)
    # a run whose report page is a symlink to a secret; one whose report folder is
    page_link = runs / "page-link"
    shutil.copytree(run, page_link, symlinks=True)
    (page_link / "report" / "report.html").unlink()
    (page_link / "report" / "report.html").symlink_to(outside / "secret.txt")
    dir_link = runs / "dir-link"
    shutil.copytree(run, dir_link, symlinks=True)
    shutil.rmtree(dir_link / "report")
    (outside / "report").mkdir()
    (outside / "report" / "report.html").write_bytes(SECRETS["outside_report"])
    (dir_link / "report").symlink_to(outside / "report", target_is_directory=True)
    events_sig = (run / "events.jsonl").read_text().split('"sig":"')[1][:128].encode()
    secrets = {**SECRETS, "sig": events_sig,
               "private_key": signing_key_file().read_bytes().strip().splitlines()[1]}
    operator_key()          # the session's key exists (it signed the fixture)
    return {"runs": runs, "run": run, "outside": outside, "secrets": secrets}


@pytest.fixture(scope="module")
def server(folder):
    httpd, url = make_server(folder["runs"], "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    token = url.split("?token=", 1)[1]
    yield {"port": httpd.server_address[1], "token": token, "url": url}
    httpd.shutdown()
    httpd.server_close()


def _get(port: int, path: str, headers: dict | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=False, skip_accept_encoding=True)
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _no_secret(body: bytes, secrets: dict) -> None:
    for name, secret in secrets.items():
        assert secret not in body, f"{name} leaked"


def _paths(folder: dict) -> list[str]:
    run = RUN
    outside = folder["outside"]
    inner = ["grader/heldout.jsonl", "grader/token", "driver/gateway.key",
             "results/secret.json", "results/1.json", "events.jsonl", "logs/agent.log",
             "run.json", "workspace/link", "workspace/key", "workspace/shadow",
             "workspace/out/secret.txt", "report/report.html", "report/report.json"]
    paths = []
    for rel in inner:
        paths += [f"/{run}/{rel}", f"/runs/{run}/{rel}", f"//{run}/{rel}",
                  f"/runs/{run}/report/../{rel}", f"/runs/{run}/report/%2e%2e/{rel}",
                  f"/runs/{quote(run + '/' + rel, safe='')}/report",
                  f"/runs/{quote(run + '/' + rel.split('/')[0], safe='')}/report",
                  f"/index.html/../{run}/{rel}", f"/leaderboard/../{run}/{rel}",
                  f"/./{run}/{rel}", f"/{run}//{rel}"]
    paths += [
        "/top-link", "/runs/top-link/report", "/%2e%2e/outside/secret.txt",
        "/..%2f..%2foutside%2fsecret.txt", "/runs/%2e%2e/report", "/runs/../report",
        "/runs/..%2F" + quote("outside/report", safe="") + "/report",
        "/runs/linked-run/report", "/runs/page-link/report", "/runs/dir-link/report",
        "/linked-run/report/report.html", "/dir-link/report/report.html",
        "/page-link/report/report.html",
        str(outside / "secret.txt"), "/" + quote(str(outside / "secret.txt"), safe=""),
        "/runs/" + quote(str(outside / "elsewhere-run"), safe="") + "/report",
        "/runs/" + quote(str(folder["run"]), safe="") + "/report",
        str(signing_key_file()), "/runs/" + quote(str(signing_key_file().parent), safe="")
        + "/report", "/etc/shadow", "/etc/passwd", "//etc/passwd", "/../../etc/shadow",
        "/runs/%2e%2e%2f%2e%2e%2fetc%2fshadow/report", "/runs//" + RUN + "/report",
        "/runs/" + RUN + "//report", "/runs/" + RUN + "/report/", "/runs/" + RUN + "/report.html",
        "/runs/" + RUN + "/report/../../grader/token",
        "http://127.0.0.1/" + RUN + "/grader/token", "http://evil/runs/../grader/token",
    ]
    return paths


def test_every_secret_path_is_refused_with_and_without_the_token(server, folder):
    secrets = folder["secrets"]
    token = server["token"]
    for path in _paths(folder):
        sep = "&" if "?" in path else "?"
        status, body = _get(server["port"], path)
        assert status == 403, (path, status)
        _no_secret(body, secrets)
        status, body = _get(server["port"], f"{path}{sep}token={token}")
        assert status in (403, 404), (path, status)
        _no_secret(body, secrets)
        status, body = _get(server["port"], path, {"Authorization": f"Bearer {token}"})
        assert status in (403, 404), (path, status)
        _no_secret(body, secrets)


def test_a_report_page_is_served_with_the_token_only(server, folder):
    token = server["token"]
    page = (folder["run"] / "report" / "report.html").read_bytes()
    status, body = _get(server["port"], f"/runs/{RUN}/report?token={token}")
    assert status == 200 and body == page
    _no_secret(body, folder["secrets"])
    assert _get(server["port"], f"/runs/{RUN}/report")[0] == 403
    assert _get(server["port"], f"/runs/{RUN}/report?token=")[0] == 403
    assert _get(server["port"], f"/runs/{RUN}/report?token={token[:-1]}x")[0] == 403
    assert _get(server["port"], f"/runs/{RUN}/report?token={token}&token={token}")[0] == 403
    status, body = _get(server["port"], f"/runs/{RUN}/report",
                        {"Authorization": f"Bearer {token}"})
    assert status == 200 and body == page


def test_the_index_links_reports_with_the_token_and_nothing_else(server, folder):
    token = server["token"]
    status, body = _get(server["port"], f"/?token={token}")
    assert status == 200
    _no_secret(body, folder["secrets"])
    links = re.findall(rb'href="([^"]+)"', body)
    assert f"/runs/{RUN}/report?token={token}".encode() in links
    # the symlinked runs are listed (they hold a run.json) but never linked
    for bad in (b"linked-run", b"page-link", b"dir-link"):
        assert not any(bad in link for link in links), links
    for link in links:                     # every link of the page works and leaks nothing
        status, linked = _get(server["port"], link.decode())
        assert status == 200, link
        _no_secret(linked, folder["secrets"])
    status, body = _get(server["port"], f"/leaderboard?token={token}")
    assert status == 200 and b"<table" in body
    _no_secret(body, folder["secrets"])
    assert _get(server["port"], "/")[0] == 403
    assert _get(server["port"], "/leaderboard")[0] == 403
    assert _get(server["port"], f"/no/such/page?token={token}")[0] == 404


def test_forbidden_answers_are_all_alike(server, folder):
    """Without the token, an existing page, a secret and nothing at all answer the same."""
    answers = {_get(server["port"], path) for path in
               ("/", f"/runs/{RUN}/report", f"/{RUN}/grader/token", "/nothing")}
    assert len(answers) == 1 and next(iter(answers))[0] == 403


def test_security_headers(server):
    conn = http.client.HTTPConnection("127.0.0.1", server["port"], timeout=30)
    conn.request("GET", f"/?token={server['token']}")
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.getheader("Referrer-Policy") == "no-referrer"
    assert "default-src 'none'" in response.getheader("Content-Security-Policy")
    assert response.getheader("Cache-Control") == "no-store"
    assert "Python" not in (response.getheader("Server") or "")


def test_only_ended_real_run_directories_are_served(folder):
    runs = served_runs(folder["runs"])
    assert RUN in runs and "linked-run" not in runs
    assert read_report_page(folder["runs"], "page-link") is None
    assert read_report_page(folder["runs"], "dir-link") is None
    assert read_report_page(folder["runs"], "linked-run") is None
    assert read_report_page(folder["runs"], "../outside") is None
    assert read_report_page(folder["runs"], str(folder["outside"])) is None
    assert read_report_page(folder["runs"], RUN).startswith(b"<!DOCTYPE html>")


def test_missing_reports_are_never_written_through_a_symlink(folder, tmp_path):
    before = (folder["outside"] / "report" / "report.html").read_bytes()
    write_missing_reports(folder["runs"])
    assert (folder["outside"] / "report" / "report.html").read_bytes() == before
    assert (folder["outside"] / "secret.txt").read_bytes() == SECRETS["outside"]


# ----------------------------------------------------------------------------- addresses
def test_loopback_only_unless_public(folder, capsys):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("10.1.2.3")
    for host in ("0.0.0.0", "10.1.2.3", "::", ""):
        with pytest.raises(A2CError, match="--public"):
            make_server(folder["runs"], host, 0)
    assert main(["view", str(folder["runs"]), "--serve", "--port", "0",
                 "--host", "0.0.0.0"]) != 0
    assert "--public" in capsys.readouterr().err
    httpd, url = make_server(folder["runs"], "0.0.0.0", 0, public=True)   # explicit opt-in
    httpd.server_close()
    assert "?token=" in url


def test_static_mode_still_writes_the_page(folder, tmp_path):
    out = tmp_path / "index.html"
    assert main(["view", str(folder["runs"]), "--out", str(out), "--no-reports"]) == 0
    html = out.read_text()
    assert f'href="{RUN}/report/report.html"' in html
    _no_secret(html.encode(), folder["secrets"])


def test_the_real_command_prints_a_token_url_and_refuses_files(folder):
    env = {**os.environ, "NO_PROXY": "*"}
    proc = subprocess.Popen([sys.executable, "-m", "a2c.cli", "view", str(folder["runs"]),
                             "--serve", "--port", "0", "--no-reports"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        line = proc.stdout.readline().decode()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)", line)
        assert match, line
        port, token = int(match.group(1)), match.group(2)
        assert len(token) >= 32
        assert _get(port, f"/?token={token}")[0] == 200
        assert _get(port, f"/runs/{RUN}/report?token={token}")[0] == 200
        for path in (f"/{RUN}/grader/token", f"/{RUN}/grader/token?token={token}",
                     f"/{RUN}/workspace/key?token={token}", "/"):
            status, body = _get(port, path)
            assert status in (403, 404)
            _no_secret(body, folder["secrets"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
