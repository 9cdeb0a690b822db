"""Building DeepSearchQA's frozen corpus (runtime/envs/deepsearchqa/corpus.py) against a fake
SearxNG and fake web pages on loopback: no real web is touched."""

from __future__ import annotations

import csv
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from a2c.runtime.envs.deepsearchqa.corpus import CorpusError, build, visible_text
from a2c.runtime.envs.deepsearchqa.data import generate
from a2c.runtime.envs.deepsearchqa.search import CorpusSearch

PAGES = {
    "/volcano": ("text/html", "<html><head><title>Mount Ember</title><style>.x{}</style></head>"
                 "<body><script>var secret = 'tracking';</script><h1>Mount Ember</h1>"
                 "<p>Mount Ember is a volcano that erupted in 1888.</p></body></html>"),
    "/river": ("text/html; charset=utf-8", "<html><body><p>The Silver River flows 420 km "
               "through Norland.</p><noscript>enable js</noscript></body></html>"),
    "/notes.txt": ("text/plain", "Plain notes: the Silver River freezes in winter."),
    "/logo.png": ("image/png", "\x89PNG...."),
}


class Web(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/search":
            q = urllib.parse.parse_qs(url.query)["q"][0]
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            if "fail" in q:
                return self._send(500, "text/plain", "engine error")
            results = [{"url": f"{base}/volcano#top", "title": "Ember (search title)",
                        "content": "volcano snippet"},
                       {"url": f"{base}/river", "title": "River", "content": "river snippet"},
                       {"url": f"{base}/gone", "title": "Gone page", "content": "only a snippet"},
                       {"url": f"{base}/logo.png", "title": "Logo", "content": ""},
                       {"url": f"{base}/notes.txt", "title": "Notes", "content": "notes"},
                       {"url": "ftp://example.invalid/x", "title": "FTP", "content": ""}]
            if "river" in q.lower():
                results = results[1:] + results[:1]
            return self._send(200, "application/json", json.dumps({"results": results}))
        if url.path in PAGES:
            ctype, body = PAGES[url.path]
            return self._send(200, ctype, body)
        self._send(404, "text/plain", "not found")

    def _send(self, status, ctype, body):
        data = body.encode("utf-8", "surrogatepass")
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def web():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Web)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def questions(tmp_path, problems) -> object:
    path = tmp_path / "DSQA-full.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["problem", "problem_category", "answer", "answer_type"])
        w.writeheader()
        for i, p in enumerate(problems):
            w.writerow({"problem": p, "problem_category": "geo", "answer": str(i),
                        "answer_type": "Single Answer"})
    return path


def test_visible_text_drops_scripts_styles_and_head():
    title, text = visible_text(PAGES["/volcano"][1])
    assert title == "Mount Ember" and "erupted in 1888" in text
    assert "tracking" not in text and ".x{}" not in text


def test_build_is_deterministic_deduplicated_and_manifested(web, tmp_path):
    qs = questions(tmp_path, ["When did Mount Ember erupt?", "How long is the Silver River?",
                              "Which volcano is in Norland?"])
    out = tmp_path / "a" / "corpus.jsonl"
    manifest = build(qs, web, out, per_query=6, all_rows=True, workers=4, say=lambda _: None)
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    urls = [d["url"] for d in docs]
    assert len(urls) == len(set(urls)) == 4                      # 3 queries, same 4 usable pages
    assert urls[0].endswith("/volcano") and "#" not in urls[0]   # question order, then rank
    assert [d["id"] for d in docs] == ["doc-000001", "doc-000002", "doc-000003", "doc-000004"]
    by_url = {d["url"].rsplit("/", 1)[1]: d for d in docs}
    assert by_url["volcano"]["title"] == "Mount Ember" and "tracking" not in by_url["volcano"]["text"]
    assert by_url["gone"] == {**by_url["gone"], "text": "only a snippet", "snippet": True}
    assert "freezes in winter" in by_url["notes.txt"]["text"]
    failed = {f["url"].rsplit("/", 1)[1]: f["error"] for f in manifest["failed_pages"]}
    assert failed["gone"] == "HTTP 404" and "image/png" in failed["logo.png"]
    assert "not an http" in failed["x"]
    assert manifest["documents"] == 4 and manifest["snippet_only"] == 1
    saved = json.loads((tmp_path / "a" / "corpus.manifest.json").read_text())
    import hashlib
    assert saved["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()

    again = tmp_path / "b" / "corpus.jsonl"
    build(qs, web, again, per_query=6, all_rows=True, workers=1, say=lambda _: None)
    assert again.read_bytes() == out.read_bytes()                # threads do not change it

    # the task's own pieces use it: the generator copies it, BM25 finds the right page
    gen = generate({"questions": str(qs), "corpus": str(out), "train": 1, "test": 1}, 7,
                   tmp_path / "gen")
    assert gen["train"][0]["corpus"] == "corpus.jsonl"
    hit = CorpusSearch(tmp_path / "gen" / "corpus.jsonl", engine="python").search("erupted 1888")
    assert hit[0].url.endswith("/volcano")


def test_the_tasks_split_is_the_default_selection(web, tmp_path):
    qs = questions(tmp_path, [f"question {i} about the river" for i in range(5)])
    manifest = build(qs, web, tmp_path / "c.jsonl", train=2, test=1, say=lambda _: None)
    assert manifest["questions"] == 3
    with pytest.raises(CorpusError, match="3 questions asked, 2 available|available"):
        build(questions(tmp_path, ["a", "b"]), web, tmp_path / "d.jsonl", train=2, test=1,
              say=lambda _: None)


def test_bad_inputs_are_clear_errors_and_write_nothing(web, tmp_path):
    out = tmp_path / "corpus.jsonl"
    with pytest.raises(CorpusError, match="questions file not found"):
        build(tmp_path / "missing.csv", web, out, say=lambda _: None)
    with pytest.raises(CorpusError, match="no questions"):
        build(questions(tmp_path, ["", " "]), web, out, all_rows=True, say=lambda _: None)
    with pytest.raises(CorpusError, match="search failed for 2 of 2 questions.*SearxNG"):
        build(questions(tmp_path, ["fail one", "fail two"]), web, out, all_rows=True,
              say=lambda _: None)
    with pytest.raises(CorpusError, match="search failed"):
        build(questions(tmp_path, ["x"]), "http://127.0.0.1:9", out, all_rows=True, timeout=2,
              say=lambda _: None)
    assert not out.exists() and not list(tmp_path.glob(".corpus*"))


def test_cli(web, tmp_path, capsys):
    from a2c.cli import main
    qs = questions(tmp_path, ["When did Mount Ember erupt?"])
    out = tmp_path / "corpus.jsonl"
    assert main(["data", "corpus", "deepsearchqa", "--questions", str(qs), "--searxng", web,
                 "--out", str(out), "--all", "--per-query", "2"]) == 0
    assert len(out.read_text().splitlines()) == 2
    assert main(["data", "corpus", "deepsearchqa", "--questions", str(tmp_path / "no.csv"),
                 "--searxng", web, "--out", str(out)]) != 0
    assert "questions file not found" in capsys.readouterr().err
