"""DeepSearchQA's answer scoring: SQuAD-normalised token F1 for single answers, one-to-one
matched precision/recall/F1 for set answers, or the benchmark's LLM judge (see `env.py`)."""

from __future__ import annotations

import json
import re
import string
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from a2c.runtime.envs.base import EnvCrash


@dataclass(frozen=True)
class AnswerScore:
    """One answer's score: `reward` (the F1 the episode earns), `em`, `f1` and `correct` (won);
    a set answer (and the judge) adds its one-to-one match counts and precision/recall."""
    kind: str                         # "single" | "set" | "judge"
    reward: float
    em: float
    f1: float
    correct: bool
    precision: float | None = None
    recall: float | None = None
    matched: int | None = None
    excessive: int | None = None
    missing: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set (the episode's `info["score_detail"]`)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


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


def score_set(pred: list[str], gold: list[str], threshold: float = 1.0) -> AnswerScore:
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
    correct = matched == len(gold) == len(pred)
    return AnswerScore(kind="set", reward=f1, em=float(correct), f1=f1, correct=correct,
                       precision=precision, recall=recall, matched=matched,
                       excessive=len(pred) - matched, missing=len(gold) - matched)


def score_answer(prediction: str, record: dict, threshold: float = 1.0) -> AnswerScore:
    gold = record.get("answer")
    if is_set_answer(record):
        return score_set(split_set(prediction, prediction=True), split_set(gold), threshold)
    golds = gold if isinstance(gold, (list, tuple)) else [gold]
    em = max(exact_match(prediction, g) for g in golds)
    f1 = max(token_f1(prediction, g) for g in golds)
    return AnswerScore(kind="single", reward=f1, em=em, f1=f1, correct=em == 1.0)


JUDGE_PROMPT = """You grade an answer to a research question against the ground truth.
Question: {question}
Ground truth ({kind}): {gold}
Response: {response}
For each ground-truth item decide whether the response states it (allow paraphrases and formatting
differences). Count the response's items that are not in the ground truth as excessive.
Reply with JSON only: {{"correct": [true/false per ground-truth item, in order], "excessive": N}}"""


def judge_score(prediction: str, record: dict, env: dict | None = None) -> AnswerScore:
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
    correct = matched == len(gold) and excessive == 0
    return AnswerScore(kind="judge", reward=f1, em=float(correct), f1=f1, correct=correct,
                       precision=precision, recall=recall)
