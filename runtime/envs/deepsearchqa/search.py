"""DeepSearchQA's search providers (the option `provider`): BM25 over a frozen corpus (bm25s, or
the same formula in pure Python) and SearxNG; `make_search` picks one per record (see `env.py` for
the options)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

from a2c.runtime.envs.base import EnvCrash
from a2c.runtime.envs.deepsearchqa.documents import Document, WebResult
from a2c.settings import get as setting

TOKENIZER_VERSION = "1"
K1, B = 1.5, 0.75
STOPWORDS = frozenset("""a an and are as at be but by for if in into is it its no not of on or
such that the their then there these they this to was were will with which who whom what when
where why how do does did has have had from""".split())


# ------------------------------------------------------------------------------- tokenizer, BM25
def tokenize(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOPWORDS]


class PurePythonBM25:
    """BM25, Lucene variant (the ranking of Okapi BM25 with a non-negative idf); bm25s' formula."""

    def __init__(self, docs_tokens: list[list[str]], k1: float = K1, b: float = B):
        self.k1, self.b = k1, b
        self.n = len(docs_tokens)
        self.lengths = [len(t) for t in docs_tokens]
        self.avgdl = (sum(self.lengths) / self.n) if self.n else 0.0
        self.tf = [Counter(t) for t in docs_tokens]
        df = Counter(w for t in docs_tokens for w in set(t))
        self.idf = {w: math.log(1 + (self.n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def scores(self, query_tokens: list[str]) -> list[float]:
        out = [0.0] * self.n
        for w in query_tokens:
            idf = self.idf.get(w)
            if idf is None:
                continue
            for i, tf in enumerate(self.tf):
                f = tf.get(w)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                    out[i] += idf * f / (f + norm)
        return out


class _Bm25sIndex:
    def __init__(self, docs_tokens: list[list[str]], cache: Path | None):
        import bm25s

        self.n = len(docs_tokens)
        self.retriever = None
        if cache is not None and (cache / "params.index.json").is_file():
            try:
                self.retriever = bm25s.BM25.load(str(cache))
            except Exception:  # noqa: BLE001 - a broken cache is rebuilt
                self.retriever = None
        if self.retriever is None:
            self.retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
            self.retriever.index(docs_tokens, show_progress=False)
            if cache is not None:
                tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
                tmp.mkdir(parents=True, exist_ok=True)
                self.retriever.save(str(tmp), show_progress=False)
                try:
                    tmp.rename(cache)
                except OSError:      # another process won the race: use its copy next time
                    pass
        self.vocab = set(self.retriever.vocab_dict)

    def scores(self, query_tokens: list[str]) -> list[float]:
        q = [t for t in query_tokens if t in self.vocab]
        if not q:
            return [0.0] * self.n
        return [float(x) for x in self.retriever.get_scores(q)]


class CorpusSearch:
    """BM25 over one frozen JSONL corpus; `search` and `open` are deterministic."""

    def __init__(self, path: str | Path, *, engine: str = "auto", cache_root: Path | None = None):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"corpus not found: {self.path}")
        raw = self.path.read_bytes()
        self.docs = [Document.from_line(json.loads(line), f"{self.path}:{n}")
                     for n, line in enumerate(raw.decode("utf-8").splitlines(), 1)
                     if line.strip()]
        self.by_id = {d.id: d for d in self.docs}
        tokens = [tokenize(f"{d.title} {d.text}") for d in self.docs]
        self.key = hashlib.sha256(raw + f"|tok{TOKENIZER_VERSION}|k1={K1}|b={B}".encode()).hexdigest()
        self.engine = engine
        if engine in ("auto", "bm25s"):
            try:
                import bm25s  # noqa: F401
                cache = None
                if cache_root is not None:
                    cache = Path(cache_root) / "bm25" / f"{self.key[:32]}-bm25s"
                    cache.parent.mkdir(parents=True, exist_ok=True)
                self.index = _Bm25sIndex(tokens, cache)
                self.engine = "bm25s"
            except ImportError:
                if engine == "bm25s":
                    raise
                self.engine = "python"
        if self.engine in ("python", "auto"):
            self.index = PurePythonBM25(tokens)
            self.engine = "python"

    def ranked(self, query: str) -> list[tuple[float, Document]]:
        scores = self.index.scores(tokenize(query))
        order = sorted(range(len(self.docs)), key=lambda i: (-round(scores[i], 9), i))
        return [(scores[i], self.docs[i]) for i in order if scores[i] > 0]

    def search(self, query: str, k: int = 3) -> list[Document]:
        return [d.ranked(s) for s, d in self.ranked(query)[:k]]

    def open(self, doc_id: str) -> Document | None:
        return self.by_id.get(str(doc_id))


class SearxngSearch:
    """Live web search through a SearxNG JSON API (optional; not reproducible)."""

    def __init__(self, url: str, timeout: float = 20.0):
        self.url, self.timeout = url.rstrip("/"), timeout
        self.pages: dict[str, Document] = {}

    def search(self, query: str, k: int = 3) -> list[Document]:
        q = urllib.parse.urlencode({"q": query, "format": "json"})
        try:
            with urllib.request.urlopen(f"{self.url}/search?{q}", timeout=self.timeout) as r:
                results = WebResult.from_reply(json.loads(r.read()))
        except (OSError, ValueError) as exc:
            raise EnvCrash(f"web search failed: {exc}") from None
        out = [res.as_document() for res in results[:k]]
        self.pages.update((doc.id, doc) for doc in out)
        return out

    def open(self, doc_id: str) -> Document | None:
        return self.pages.get(doc_id)


PROVIDERS = ("bm25", "searxng")


def search_provider(options: dict) -> str:
    """`options.provider` (default bm25); a task written for a2c 0.1.0 named it `backend`, which
    is still read (options are free-form, so no schema maps it)."""
    return str(options.get("provider") or options.get("backend") or "bm25")


class Searchers:
    """What `make_search` returns: the search provider for a record (one BM25 index per corpus
    file)."""

    _memo: dict[tuple, CorpusSearch] = {}
    _lock = threading.Lock()

    def __init__(self, options: dict, data_root: Path):
        self.options = dict(options)
        self.root = Path(data_root)
        self.provider = search_provider(self.options)
        if self.provider not in PROVIDERS:
            raise ValueError(f"deepsearchqa: unknown search provider {self.provider!r} "
                             f"({', '.join(PROVIDERS)})")

    def for_record(self, record: dict):
        if self.provider == "searxng":
            url = self.options.get("url") or setting("A2C_SEARXNG_URL")
            if not url:
                raise EnvCrash("deepsearchqa: provider searxng needs options.url or "
                               "$A2C_SEARXNG_URL")
            return SearxngSearch(url)
        rel = record.get("corpus") or self.options.get("corpus")
        if not rel:
            raise EnvCrash("deepsearchqa: no corpus (record field 'corpus' or options.corpus)")
        path = Path(rel) if Path(rel).is_absolute() else self.root / rel
        st = path.stat() if path.is_file() else None
        key = (str(path.resolve()), str(self.options.get("engine", "auto")),
               st.st_mtime_ns if st else 0, st.st_size if st else 0)
        with self._lock:
            if key not in self._memo:
                from a2c.paths import cache_dir
                cache = None if self.options.get("cache") is False else cache_dir()
                self._memo[key] = CorpusSearch(path, engine=key[1], cache_root=cache)
            return self._memo[key]


def make_search(options: dict, data_root: str | Path) -> Searchers:
    return Searchers(options or {}, Path(data_root))
