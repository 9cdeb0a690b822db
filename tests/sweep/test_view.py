"""`a2c view` without a real sweep: a sweep.json whose trials are queued, running and failed
renders (failure reasons shown, the page reloading itself while work is left), and `--serve`
rebuilds it on every request (and serves pages only: tests/adversarial/test_viewer.py)."""

from __future__ import annotations

import importlib.util
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from a2c.analysis.view import collect, render_view, write_view

MAKER = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "make_fixture_run.py"


@pytest.fixture(scope="module")
def maker():
    spec = importlib.util.spec_from_file_location("a2c_make_fixture_run_view", MAKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sweep(runs: Path, statuses: dict[str, str], ended: bool) -> None:
    runs.mkdir(parents=True, exist_ok=True)
    trials = [{"id": name, "task": "arith", "agent": "ref-sft", "driver": None, "mode": "free",
               "seed": i, "run_dir": str(runs / name), "status": status,
               "reason": "agent failed (exit 3, exited): boom" if status == "failed" else None}
              for i, (name, status) in enumerate(statuses.items())]
    (runs / "sweep.json").write_text(json.dumps({
        "suite": "builtin", "title": "T", "address": "local", "started_at": "x",
        "ended_at": "y" if ended else None, "trials": trials}))


def test_a_running_sweep_reloads_and_shows_reasons(tmp_path):
    runs = tmp_path / "runs"
    _sweep(runs, {"a": "queued", "b": "running", "c": "failed"}, ended=False)
    data = collect(runs)
    assert data.live and data.counts == {"queued": 1, "running": 1, "failed": 1}
    html = render_view(runs)
    assert 'http-equiv="refresh" content="5"' in html
    assert "agent failed (exit 3, exited): boom" in html
    assert html.count("<tr data-status=") == 3 and "No run has a record yet" in html
    _sweep(runs, {"c": "failed"}, ended=True)
    assert 'http-equiv="refresh"' not in render_view(runs)
    assert write_view(runs) == runs / "index.html"


def test_serve_rebuilds_the_page_per_request(tmp_path):
    from a2c.analysis.view_server import make_server
    runs = tmp_path / "runs"
    _sweep(runs, {"a": "queued"}, ended=False)
    (runs / "note.txt").write_text("a file of the folder")
    httpd, url = make_server(runs, "127.0.0.1", 0, reports=False)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        assert url.startswith(f"http://127.0.0.1:{httpd.server_address[1]}/?token=")
        base, query = url.split("/?", 1)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # no proxy
        first = opener.open(url).read().decode()
        assert 'data-status="queued"' in first
        _sweep(runs, {"a": "running"}, ended=False)
        again = opener.open(url).read().decode()
        assert 'data-status="running"' in again
        # pages, not files: the folder's files are not served, with the token or without
        for path in ("/note.txt?" + query, "/note.txt", "/"):
            try:
                opener.open(base + path)
                raise AssertionError(f"{path} was served")
            except urllib.error.HTTPError as exc:
                assert exc.code in (403, 404)
                assert b"a file of the folder" not in exc.read()
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_static_page_links_reports_by_relative_path(tmp_path, maker):
    runs = tmp_path / "runs"
    maker.make_run(runs / "r1")
    from a2c.analysis.view import write_missing_reports
    write_missing_reports(runs)
    html = render_view(runs)
    assert 'href="r1/report/report.html"' in html
    assert (runs / "r1" / "report" / "report.html").is_file()
