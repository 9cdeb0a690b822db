"""Build DeepSearchQA's frozen corpus once, from the web, so every evaluation searches the same pages.

DeepSearchQA targets the open web; a score that depends on today's search results cannot be
reproduced. The task's default search provider is BM25 over a frozen JSONL corpus instead, and
this is how a maintainer with web access makes one (the runtime never fetches at evaluation time):

    a2c data corpus deepsearchqa --questions DSQA-full.csv --searxng http://127.0.0.1:8888 \\
        --out $A2C_DATA_HOME/deepsearchqa/corpus.jsonl [--per-query 5] [--all]

Questions: the task's 300 (the same seeded selection as the generator: 100 agent + 200 held out),
or every row with `--all`. For each, the question text goes to a SearxNG instance's JSON API; the
top `--per-query` result pages are fetched (http/https only, `--max-bytes`, `--timeout`, HTML or
plain text), reduced to their visible text (scripts, styles and the head dropped, at most
`--max-chars`) and deduplicated by URL (the fragment dropped). A page that cannot be fetched keeps
the search engine's title and snippet (`"snippet": true`), so the corpus still holds what the
search showed. Documents are numbered in question order, then rank (`doc-000001`, ...), and
written atomically with a manifest beside them (`corpus.manifest.json`: sha256 of the corpus,
counts, the failures with their reasons, the settings, when it was built). Fetching runs in a few
threads; the output does not depend on their timing.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from a2c.errors import A2CError
from a2c.fsutil import write_json_atomic, write_text_atomic
from a2c.runtime.envs.deepsearchqa.data import read_questions, split_questions
from a2c.runtime.envs.deepsearchqa.documents import Document, WebResult
from a2c.timefmt import iso_utc

USER_AGENT = "a2c-corpus-builder/1 (+https://github.com/a2c; research benchmark)"
TEXT_TYPES = ("text/html", "text/plain", "application/xhtml+xml")


class CorpusError(A2CError):
    """The corpus cannot be built as asked (no questions, search engine unreachable, ...)."""


class _VisibleText(HTMLParser):
    SKIP = {"script", "style", "head", "noscript", "template", "svg"}
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section",
             "article", "table", "ul", "ol", "pre", "blockquote", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.skipping = 0
        self.parts: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skipping += 1
        if tag == "title":
            self._in_title = True
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1
        if tag == "title":
            self._in_title = False
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self.skipping:
            self.parts.append(data)


def visible_text(html: str) -> tuple[str, str]:
    """(title, visible text) of an HTML page: whitespace collapsed, one block a line."""
    parser = _VisibleText()
    parser.feed(html)
    parser.close()
    lines = [re.sub(r"\s+", " ", line).strip() for line in "".join(parser.parts).split("\n")]
    return re.sub(r"\s+", " ", parser.title).strip(), "\n".join(x for x in lines if x)


def normalise_url(url: str) -> str:
    return urllib.parse.urldefrag(url.strip())[0]


def search(searxng: str, query: str, timeout: float) -> list[WebResult]:
    q = urllib.parse.urlencode({"q": query, "format": "json"})
    req = urllib.request.Request(f"{searxng.rstrip('/')}/search?{q}",
                                 headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return WebResult.from_reply(json.loads(resp.read()))


@dataclass(frozen=True)
class Page:
    """A fetched page's title and visible text, or why it could not be fetched (`error`)."""
    title: str = ""
    text: str = ""
    error: str | None = None


def fetch_page(url: str, *, timeout: float, max_bytes: int, max_chars: int) -> Page:
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return Page(error="not an http(s) URL")
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if ctype and ctype not in TEXT_TYPES:
                return Page(error=f"content type {ctype}")
            raw = resp.read(max_bytes + 1)
            charset = resp.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        return Page(error=f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Page(error=f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}")
    if len(raw) > max_bytes:
        raw = raw[:max_bytes]
    text = raw.decode(charset, "replace")
    title, body = visible_text(text) if ctype != "text/plain" else ("", text.strip())
    return Page(title=title, text=body[:max_chars])


def select_questions(rows: list[dict], *, seed: int, train: int, test: int,
                     all_rows: bool) -> list[dict]:
    if all_rows:
        return rows
    try:
        idx = split_questions(rows, seed, train, test)
    except ValueError as exc:
        raise CorpusError(f"{exc} (use --all, or the task's --train/--test)") from None
    return [rows[i] for i in idx["train"] + idx["test"]]


def build(questions: Path, searxng: str, out: Path, *, per_query: int = 5, seed: int = 1234,
          train: int = 100, test: int = 200, all_rows: bool = False, timeout: float = 20.0,
          max_bytes: int = 2_000_000, max_chars: int = 20_000, workers: int = 8,
          say=print) -> dict:
    """Build the corpus (see the module doc); returns the manifest."""
    if not questions.is_file():
        raise CorpusError(f"questions file not found: {questions}")
    rows = select_questions(read_questions(questions), seed=seed, train=train, test=test,
                            all_rows=all_rows)
    texts = [str(r.get("problem") or r.get("prompt") or "").strip() for r in rows]
    texts = [t for t in texts if t]
    if not texts:
        raise CorpusError(f"no questions in {questions}")

    # 1. search, in question order
    hits: list[tuple[str, WebResult]] = []   # (normalised url, search result), first seen wins
    seen: set[str] = set()
    failures: list[tuple[str, str]] = []     # (query, why its search failed)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(search, searxng, t, timeout) for t in texts]
        for text, fut in zip(texts, futures):
            try:
                results = fut.result()
            except (OSError, ValueError) as exc:
                failures.append((text[:200], f"{type(exc).__name__}: "
                                             f"{getattr(exc, 'reason', exc)}"))
                continue
            for res in results[:per_query]:
                url = normalise_url(res.url)
                if url not in seen:
                    seen.add(url)
                    hits.append((url, res))
    if len(failures) > len(texts) // 2:
        raise CorpusError(f"search failed for {len(failures)} of {len(texts)} questions "
                          f"(first: {failures[0][1]}); is SearxNG at {searxng} "
                          "running with the JSON format enabled?")
    say(f"{len(texts)} questions searched, {len(hits)} distinct pages to fetch")

    # 2. fetch, then number the documents in search order
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        pages = list(pool.map(lambda h: fetch_page(h[0], timeout=timeout, max_bytes=max_bytes,
                                                   max_chars=max_chars), hits))
    docs: list[Document] = []
    failed_pages: list[dict] = []
    for (url, res), page in zip(hits, pages):
        number = f"doc-{len(docs) + 1:06d}"
        if page.error is not None or not page.text:
            failed_pages.append({"url": url, "error": page.error or "no text"})
            if res.content.strip():
                docs.append(Document(id=number, url=url, title=res.title,
                                     text=res.content.strip(), snippet=True))
        else:
            docs.append(Document(id=number, url=url, title=page.title or res.title,
                                 text=page.text))
    if not docs:
        raise CorpusError("no documents: every page failed and no search result had a snippet")

    # 3. write atomically, with the manifest
    body = "".join(json.dumps(d.to_line(), ensure_ascii=False, sort_keys=True) + "\n"
                   for d in docs)
    write_text_atomic(out, body)
    digest, snippet_only = hashlib.sha256(body.encode("utf-8")).hexdigest(), \
        sum(1 for d in docs if d.snippet)
    manifest = {
        "corpus": out.name, "sha256": digest,
        "documents": len(docs), "snippet_only": snippet_only,
        "questions": len(texts),
        "failed_queries": [{"query": q, "error": e} for q, e in failures],
        "failed_pages": failed_pages,
        "settings": {"searxng": searxng, "per_query": per_query, "seed": seed, "train": train,
                     "test": test, "all": all_rows, "max_bytes": max_bytes,
                     "max_chars": max_chars},
        "built_at": iso_utc(time.time()),
    }
    manifest_path = out.with_name(out.stem + ".manifest.json")
    write_json_atomic(manifest_path, manifest)
    say(f"wrote {out}: {len(docs)} documents ({snippet_only} from snippets only, "
        f"{len(failed_pages)} pages failed), sha256 {digest[:16]}...; "
        f"manifest {manifest_path.name}")
    return manifest


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--questions", required=True, type=Path, help="DSQA-full.csv (or JSONL)")
    p.add_argument("--searxng", required=True, help="a SearxNG instance with format=json enabled")
    p.add_argument("--out", required=True, type=Path, help="the corpus JSONL to write")
    p.add_argument("--per-query", type=int, default=5, help="result pages kept per question")
    p.add_argument("--all", dest="all_rows", action="store_true",
                   help="every question, not only the task's 100 + 200")
    p.add_argument("--seed", type=int, default=1234, help="the task's split seed")
    p.add_argument("--train", type=int, default=100)
    p.add_argument("--test", type=int, default=200)
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per request")
    p.add_argument("--max-bytes", type=int, default=2_000_000, help="bytes read per page")
    p.add_argument("--max-chars", type=int, default=20_000, help="text kept per page")
    p.add_argument("--workers", type=int, default=8, help="parallel requests")


def run_cli(args) -> dict:
    return build(args.questions, args.searxng, args.out, per_query=args.per_query,
                 seed=args.seed, train=args.train, test=args.test, all_rows=args.all_rows,
                 timeout=args.timeout, max_bytes=args.max_bytes, max_chars=args.max_chars,
                 workers=args.workers)
