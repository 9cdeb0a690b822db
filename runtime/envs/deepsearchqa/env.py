"""DeepSearchQA adapter: a ReAct loop over a search tool, answers scored as the benchmark does.

One episode = one question. Actions (one per turn):

    search[query]     top-k passages from the search provider (default: BM25 over a frozen corpus)
    open[doc_id]      the full text of one document (truncated to `max_doc_chars`)
    answer[text]      ends the episode; a set answer lists its elements separated by commas
    (finish[text] is accepted for answer[text], think[...] is a no-op "OK.")

Search providers (`options.provider`; `options.backend`, its name in a2c 0.1.0, is still read):
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

import re

from a2c.runtime.envs.base import BadAction, EnvCrash
from a2c.runtime.envs.deepsearchqa.scoring import is_set_answer, judge_score, score_answer
from a2c.runtime.envs.deepsearchqa.search import Searchers
from a2c.runtime.envs.prompts import PromptFormat

ACTION_RE = re.compile(r"\b(search|open|answer|finish|think)\[(.*)\]", re.I | re.S)


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
        self.provider = None
        self.done = False

    def reset(self) -> tuple[str, dict]:
        self.provider = self.searchers.for_record(self.record)
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
            hits = self.provider.search(arg, self.top_k)
            if not hits:
                return f"No results for {arg!r}.", 0.0, False, self._info()
            lines = []
            for n, d in enumerate(hits, 1):
                text = " ".join(d.text.split())
                snippet = text[: self.snippet_chars] + ("..." if len(text) > self.snippet_chars else "")
                lines.append(f"[{n}] {d.id}: {d.title}\n{snippet}")
            return "\n".join(lines), 0.0, False, {**self._info(), "results": [d.id for d in hits]}
        if verb == "open":
            doc = self.provider.open(arg)
            if doc is None:
                return self._bad(f"no document {arg!r} (open an id from the search results)")
            text = " ".join(doc.text.split())[: self.max_doc_chars]
            return f"{doc.id}: {doc.title}\n{text}", 0.0, False, self._info()
        # answer / finish
        if not arg:
            return self._bad("empty answer")
        self.done = True
        s = judge_score(arg, self.record) if self.scoring == "judge" else \
            score_answer(arg, self.record, self.threshold)
        info = {"won": s.correct, "final_reward": s.reward, "answer": arg,
                "score_detail": s.to_dict(), "admissible_commands": []}
        return f"Answer submitted: {arg}", s.reward, True, info

    def close(self) -> None:
        self.provider = None


# ------------------------------------------------------------------------------- prompt format
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
