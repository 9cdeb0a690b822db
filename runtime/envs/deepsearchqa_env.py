"""DeepSearchQA adapter: a ReAct loop over a search tool, answers scored as the benchmark does.

One episode = one question. Actions (one per turn):

    search[query]     top-k passages from the search backend (default: BM25 over a frozen corpus)
    open[doc_id]      the full text of one document (truncated to `max_doc_chars`)
    answer[text]      ends the episode; a set answer lists its elements separated by commas
    (finish[text] is accepted for answer[text], think[...] is a no-op "OK.")

Search backends (`options.backend`):
- `bm25` (default): a frozen local corpus (JSONL lines `{"id", "title", "text", "url"?}`) indexed
  with BM25 (Lucene variant: k1 = 1.5, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))) via
  `bm25s`, or a pure-Python implementation of the same formula when bm25s is not installed. The
  tokenizer is fixed (lower case, `[a-z0-9]+`, a small English stop list, no stemming), ties are
  broken by corpus order, so rankings are reproducible. The bm25s index is cached on disk under
  `$A2C_CACHE/bm25/<sha256 of corpus bytes, tokenizer, parameters>` and in memory per process.
  The corpus is `record["corpus"]` (a path the data layer copies next to the records) or
  `options.corpus`, relative to the grader's data root.
- `searxng`: live web search through a SearxNG instance's JSON API (`options.url`); optional, not
  reproducible, never used by tests.

Scoring (`options.scoring`):
- `f1` (default): SQuAD normalisation (lower case, no punctuation, no articles a/an/the, single
  spaces). A "Single Answer" scores token F1 against the gold answer (exact match in
  `info["em"]`). A "Set Answer" is split into elements (gold: a list, or the string split on `,`,
  `;` and new lines; prediction: the same, plus a trailing " and "), matched one-to-one (an
  element matches when its normalised token F1 with a gold element is >= `element_threshold`,
  default 1.0 = exact match, greedily best-first); precision = matched / predicted, recall =
  matched / gold, reward = F1 — DeepSearchQA's own precision/recall/F1 over answer sets with
  normalised matching in place of its LLM judge. `won` = fully correct (EM, or every gold element
  and nothing else).
- `judge`: the benchmark's LLM-judge scoring through an OpenAI-compatible endpoint, configured
  like the pairwise judge (`A2C_JUDGE_BASE_URL`, `A2C_JUDGE_MODEL`, `A2C_JUDGE_API_KEY` or
  `A2C_JUDGE_CONFIG`). The judge lists which gold elements the response contains and how many
  elements are excessive; reward = the same F1. A judge failure crashes only that episode.

The reward arrives with `answer[...]` (`info["final_reward"]`); an episode that runs out of steps
without answering scores 0.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import random
import re
import string
import threading
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from a2c.runtime.envs.base import BadAction, EnvCrash
from a2c.runtime.envs.prompts import PromptFormat, register_format

TOKENIZER_VERSION = "1"
K1, B = 1.5, 0.75
STOPWORDS = frozenset("""a an and are as at be but by for if in into is it its no not of on or
such that the their then there these they this to was were will with which who whom what when
where why how do does did has have had from""".split())
ACTION_RE = re.compile(r"\b(search|open|answer|finish|think)\[(.*)\]", re.I | re.S)


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
        self.docs: list[dict] = []
        for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
            if line.strip():
                d = json.loads(line)
                if "id" not in d or "text" not in d:
                    raise ValueError(f"{self.path}:{n}: a corpus line needs 'id' and 'text'")
                d["id"] = str(d["id"])
                self.docs.append(d)
        self.by_id = {d["id"]: d for d in self.docs}
        tokens = [tokenize(f"{d.get('title', '')} {d['text']}") for d in self.docs]
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

    def ranked(self, query: str) -> list[tuple[float, dict]]:
        scores = self.index.scores(tokenize(query))
        order = sorted(range(len(self.docs)), key=lambda i: (-round(scores[i], 9), i))
        return [(scores[i], self.docs[i]) for i in order if scores[i] > 0]

    def search(self, query: str, k: int = 3) -> list[dict]:
        return [{**d, "score": s} for s, d in self.ranked(query)[:k]]

    def open(self, doc_id: str) -> dict | None:
        return self.by_id.get(str(doc_id))


class SearxngSearch:
    """Live web search through a SearxNG JSON API (optional; not reproducible)."""

    def __init__(self, url: str, timeout: float = 20.0):
        self.url, self.timeout, self.pages = url.rstrip("/"), timeout, {}

    def search(self, query: str, k: int = 3) -> list[dict]:
        q = urllib.parse.urlencode({"q": query, "format": "json"})
        try:
            with urllib.request.urlopen(f"{self.url}/search?{q}", timeout=self.timeout) as r:
                data = json.loads(r.read())
        except (OSError, ValueError) as exc:
            raise EnvCrash(f"web search failed: {exc}") from None
        out = []
        for res in (data.get("results") or [])[:k]:
            doc = {"id": res.get("url", ""), "title": res.get("title", ""),
                   "text": res.get("content", ""), "url": res.get("url", "")}
            self.pages[doc["id"]] = doc
            out.append(doc)
        return out

    def open(self, doc_id: str) -> dict | None:
        return self.pages.get(doc_id)


class Searchers:
    """What `make_search` returns: the backend for a record (one BM25 index per corpus file)."""

    _memo: dict[tuple, CorpusSearch] = {}
    _lock = threading.Lock()

    def __init__(self, options: dict, data_root: Path):
        self.options = dict(options)
        self.root = Path(data_root)
        self.backend = str(self.options.get("backend", "bm25"))
        if self.backend not in ("bm25", "searxng"):
            raise ValueError(f"deepsearchqa: unknown search backend {self.backend!r} (bm25, searxng)")

    def for_record(self, record: dict):
        if self.backend == "searxng":
            url = self.options.get("url") or os.environ.get("A2C_SEARXNG_URL")
            if not url:
                raise EnvCrash("deepsearchqa: backend searxng needs options.url or $A2C_SEARXNG_URL")
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


# ------------------------------------------------------------------------------- scoring
def normalize_answer(s: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    s = str(s).lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(pred: str, gold: str) -> float:
    return float(normalize_answer(pred) == normalize_answer(gold))


def token_f1(pred: str, gold: str) -> float:
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def split_set(answer: Any, prediction: bool = False) -> list[str]:
    if isinstance(answer, (list, tuple)):
        items = [str(a) for a in answer]
    else:
        items = re.split(r"[;,\n]", str(answer))
        if prediction and len(items) >= 1:
            last = re.split(r"\s+and\s+", items[-1])
            items = items[:-1] + last
    seen, out = set(), []
    for it in (i.strip() for i in items):
        n = normalize_answer(it)
        if n and n not in seen:
            seen.add(n)
            out.append(it)
    return out


def is_set_answer(record: dict) -> bool:
    t = str(record.get("answer_type") or "").lower()
    return "set" in t or isinstance(record.get("answer"), (list, tuple))


def score_set(pred: list[str], gold: list[str], threshold: float = 1.0) -> dict:
    pairs = sorted(((token_f1(p, g), i, j) for i, p in enumerate(pred) for j, g in enumerate(gold)),
                   key=lambda x: (-x[0], x[1], x[2]))
    used_p, used_g, matched = set(), set(), 0
    for f, i, j in pairs:
        if f + 1e-9 < threshold:
            break
        if i in used_p or j in used_g:
            continue
        used_p.add(i)
        used_g.add(j)
        matched += 1
    precision = matched / len(pred) if pred else 0.0
    recall = matched / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "matched": matched,
            "excessive": len(pred) - matched, "missing": len(gold) - matched,
            "correct": matched == len(gold) == len(pred)}


def score_answer(prediction: str, record: dict, threshold: float = 1.0) -> dict:
    """{reward, em, f1, precision, recall, correct, kind} for one answer."""
    gold = record.get("answer")
    if is_set_answer(record):
        s = score_set(split_set(prediction, prediction=True), split_set(gold), threshold)
        return {"kind": "set", "reward": s["f1"], **s, "em": float(s["correct"])}
    golds = gold if isinstance(gold, (list, tuple)) else [gold]
    em = max(exact_match(prediction, g) for g in golds)
    f1 = max(token_f1(prediction, g) for g in golds)
    return {"kind": "single", "reward": f1, "em": em, "f1": f1, "correct": em == 1.0}


JUDGE_PROMPT = """You grade an answer to a research question against the ground truth.
Question: {question}
Ground truth ({kind}): {gold}
Response: {response}
For each ground-truth item decide whether the response states it (allow paraphrases and formatting
differences). Count the response's items that are not in the ground truth as excessive.
Reply with JSON only: {{"correct": [true/false per ground-truth item, in order], "excessive": N}}"""


def judge_score(prediction: str, record: dict, env: dict | None = None) -> dict:
    """The benchmark's LLM-judge scoring (OpenAI-compatible endpoint, A2C_JUDGE_* settings)."""
    from a2c.runtime.graders.judge import load_judge_config

    cfg = load_judge_config(env)
    gold = split_set(record.get("answer")) if is_set_answer(record) else [str(record.get("answer"))]
    prompt = JUDGE_PROMPT.format(question=record.get("prompt", ""), gold=json.dumps(gold),
                                 kind="set" if is_set_answer(record) else "single",
                                 response=prediction)
    body = json.dumps({"model": cfg.model, "temperature": 0, "max_tokens": 256,
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    headers = {"Content-Type": "application/json"}
    if cfg.api_key:
        headers["Authorization"] = f"Bearer {cfg.api_key}"
    req = urllib.request.Request(cfg.endpoint, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=cfg.timeout_s) as r:
            content = json.loads(r.read())["choices"][0]["message"]["content"]
        verdict = json.loads(re.search(r"\{.*\}", content, re.S).group(0))
        correct = [bool(x) for x in verdict["correct"]][: len(gold)]
        excessive = max(0, int(verdict.get("excessive", 0)))
    except Exception as exc:  # noqa: BLE001 - any judge failure fails this episode only
        raise EnvCrash(f"judge failed: {type(exc).__name__}: {exc}") from None
    matched = sum(correct)
    precision = matched / (matched + excessive) if matched + excessive else 0.0
    recall = matched / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"kind": "judge", "reward": f1, "precision": precision, "recall": recall, "f1": f1,
            "em": float(matched == len(gold) and excessive == 0),
            "correct": matched == len(gold) and excessive == 0}


# ------------------------------------------------------------------------------- the episode
class DeepSearchQAEnv:
    """One question. `record`: {id, prompt (question), answer, answer_type, corpus?}."""

    def __init__(self, record: dict, searcher: Searchers, options: dict | None = None):
        opts = dict(options or {})
        self.record = record
        self.searchers = searcher
        self.top_k = int(opts.get("top_k", 3))
        self.snippet_chars = int(opts.get("snippet_chars", 300))
        self.max_doc_chars = int(opts.get("max_doc_chars", 3000))
        self.scoring = str(opts.get("scoring", "f1"))
        self.threshold = float(opts.get("element_threshold", 1.0))
        self.invalid_action = str(opts.get("invalid_action", "fail"))
        self.backend = None
        self.done = False

    def reset(self) -> tuple[str, dict]:
        self.backend = self.searchers.for_record(self.record)
        self.done = False
        question = str(self.record.get("prompt") or "")
        if not question:
            raise EnvCrash("deepsearchqa: record has no question")
        kind = "a set of answers (list them all, separated by commas)" if is_set_answer(self.record) \
            else "a single answer"
        obs = (f"Question: {question}\nThe answer is {kind}. Use search[query] to find evidence, "
               "open[doc_id] to read a document, answer[your answer] when you know it.")
        return obs, {**self._info(), "task": question}

    def _info(self) -> dict:
        return {"won": False, "admissible_commands": ["search[<query>]", "open[<doc_id>]",
                                                      "answer[<answer>]"]}

    def _bad(self, message: str):
        if self.invalid_action == "noop":
            return f"Invalid action: {message}", 0.0, False, self._info()
        raise BadAction(message)

    def step(self, action: str) -> tuple[str, float, bool, dict]:
        if self.done:
            raise BadAction("the episode is over (already answered)")
        m = ACTION_RE.fullmatch((action or "").strip())
        if not m:
            return self._bad(f"expected search[query], open[doc_id] or answer[text], got {action[:80]!r}")
        verb, arg = m.group(1).lower(), m.group(2).strip()
        if verb == "think":
            return "OK.", 0.0, False, self._info()
        if verb == "search":
            if not arg:
                return self._bad("empty search query")
            hits = self.backend.search(arg, self.top_k)
            if not hits:
                return f"No results for {arg!r}.", 0.0, False, self._info()
            lines = []
            for n, d in enumerate(hits, 1):
                text = " ".join(str(d.get("text", "")).split())
                snippet = text[: self.snippet_chars] + ("..." if len(text) > self.snippet_chars else "")
                lines.append(f"[{n}] {d['id']}: {d.get('title', '')}\n{snippet}")
            return "\n".join(lines), 0.0, False, {**self._info(), "results": [d["id"] for d in hits]}
        if verb == "open":
            doc = self.backend.open(arg)
            if doc is None:
                return self._bad(f"no document {arg!r} (open an id from the search results)")
            text = " ".join(str(doc.get("text", "")).split())[: self.max_doc_chars]
            return f"{doc['id']}: {doc.get('title', '')}\n{text}", 0.0, False, self._info()
        # answer / finish
        if not arg:
            return self._bad("empty answer")
        self.done = True
        s = judge_score(arg, self.record) if self.scoring == "judge" else \
            score_answer(arg, self.record, self.threshold)
        info = {"won": bool(s["correct"]), "final_reward": float(s["reward"]), "answer": arg,
                "score_detail": s, "admissible_commands": []}
        return f"Answer submitted: {arg}", float(s["reward"]), True, info

    def close(self) -> None:
        self.backend = None


# ------------------------------------------------------------------------------- prompt format
@register_format
class DeepSearchQAFormat(PromptFormat):
    kind = "deepsearchqa"
    system = ("You answer a research question by searching a document collection. Reply with "
              "exactly one action and nothing else: search[query], open[doc_id] or "
              "answer[your answer]. For a set answer, list every item, separated by commas.")
    list_actions = False

    def parse_action(self, output: str) -> str:
        for line in (output or "").split("\n"):
            m = ACTION_RE.search(line)
            if m:
                verb = m.group(1).lower()
                return f"{'answer' if verb == 'finish' else verb}[{m.group(2).strip()}]"
        raise BadAction("no search[...], open[...] or answer[...] action in model output "
                        f"{(output or '')[:80]!r}")


# ------------------------------------------------------------------------------- data
def _read_questions(path: Path) -> list[dict]:
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split_questions(rows: list[dict], seed: int, train: int = 100, test: int = 200) -> dict:
    """The fixed split: rows shuffled with `random.Random(seed)`, first `train` / next `test`."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    if train + test > len(rows):
        raise ValueError(f"deepsearchqa: {train} + {test} questions asked, {len(rows)} available")
    return {"train": order[:train], "test": order[train:train + test]}


def generate(params: dict, seed: int, out_dir: Path) -> dict:
    """Records from DeepSearchQA's CSV (`problem, problem_category, answer, answer_type`).

    Params: `questions` (DSQA-full.csv or JSONL with the same columns), `corpus` (the frozen
    JSONL corpus, copied to `out_dir/corpus.jsonl`), `train` (100), `test` (200). `~` and
    `$VARS` in paths are expanded. Record ids are `dsqa-<row>`; every record names the corpus.
    """
    from a2c.runtime.data.generators import DataError

    def path_of(key):
        raw = params.get(key)
        if not raw:
            raise DataError(f"deepsearchqa generator: params.{key} is required")
        p = Path(os.path.expandvars(os.path.expanduser(str(raw))))
        if not p.is_file():
            raise DataError(f"deepsearchqa generator: {key} file not found: {p} (download "
                            "DSQA-full.csv from the google/deepsearchqa data set and build the "
                            "corpus; see docs/level3.md)")
        return p

    rows = _read_questions(path_of("questions"))
    corpus = path_of("corpus")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "corpus.jsonl").write_bytes(corpus.read_bytes())
    try:
        idx = split_questions(rows, seed, int(params.get("train", 100)), int(params.get("test", 200)))
    except ValueError as exc:
        raise DataError(str(exc)) from None

    def rec(i):
        r = rows[i]
        return {"id": f"dsqa-{i}", "prompt": r.get("problem") or r.get("prompt") or "",
                "answer": r.get("answer"), "answer_type": r.get("answer_type") or "Single Answer",
                "problem_category": r.get("problem_category") or "", "corpus": "corpus.jsonl"}

    return {name: [rec(i) for i in ids] for name, ids in idx.items()}


try:  # the data layer finds this generator by name (generators.LAZY["deepsearchqa"])
    from a2c.runtime.data.generators import register as _register
    _register("deepsearchqa")(generate)
except ImportError:  # pragma: no cover
    pass
