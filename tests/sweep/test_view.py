"""`a2c view` without a real sweep: a sweep.json whose trials are queued, running and failed
renders (failure reasons shown, the page reloading itself while work is left), and `--serve`
rebuilds it on every request."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

from a2c.analysis.view import collect, render_view, write_view


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
    assert data["live"] and data["counts"] == {"queued": 1, "running": 1, "failed": 1}
    html = render_view(runs)
    assert 'http-equiv="refresh" content="5"' in html
    assert "agent failed (exit 3, exited): boom" in html
    assert html.count("<tr data-status=") == 3 and "No run has a record yet" in html
    _sweep(runs, {"c": "failed"}, ended=True)
    assert 'http-equiv="refresh"' not in render_view(runs)
    assert write_view(runs) == runs / "index.html"


def test_serve_rebuilds_the_page_per_request(tmp_path):
    from a2c.cli.view import serve
    runs = tmp_path / "runs"
    _sweep(runs, {"a": "queued"}, ended=False)
    (runs / "note.txt").write_text("a file of the folder")
    import http.server
    ports: list[int] = []
    real = http.server.ThreadingHTTPServer

    class Recording(real):
        def __init__(self, address, handler):
            super().__init__(address, handler)
            ports.append(self.server_address[1])
    http.server.ThreadingHTTPServer = Recording
    try:
        thread = threading.Thread(target=serve, daemon=True,
                                  args=(runs, "127.0.0.1", 0, False, render_view, None))
        thread.start()
        for _ in range(100):
            if ports:
                break
            time.sleep(0.05)
    finally:
        http.server.ThreadingHTTPServer = real
    base = f"http://127.0.0.1:{ports[0]}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # loopback, no proxy
    first = opener.open(base + "/").read().decode()
    assert 'data-status="queued"' in first
    _sweep(runs, {"a": "running"}, ended=False)
    again = opener.open(base + "/").read().decode()
    assert 'data-status="running"' in again
    assert opener.open(base + "/note.txt").read() == b"a file of the folder"
