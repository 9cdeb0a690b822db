"""From a judge's reply to a judgment: the verdict letter (`parse_verdict`) and, when the endpoint
returned log-probabilities, P(B) at the verdict token (`_p_b_from_logprobs`)."""

from __future__ import annotations

import json
import math
import re

# A verdict letter: upper case, or either case in brackets ("Output (a)"); a lower-case "a" on its
# own is an article, not a verdict.
_LETTER = r"(?:[(\[]\s*([AaBb])\s*[)\]]|([AB]))(?![\w'-])"
_NAMED = r"(?i:answer|output|response|model|assistant)"
_VERDICT_PATTERNS = [
    # at the start: "Answer A", "Output (a)", "Response: B", "The answer A is", "Better answer: B"
    re.compile(r"^(?i:the\s+)?(?i:(?:better|best|preferred|winning)\s+)?" + _NAMED
               + r"\s*(?i:is\s*)?[:=#-]?\s*" + _LETTER),
    # a bare letter first: "A", "(B)", "**B**", "A is better.", "B."
    re.compile(r"^" + _LETTER),
    # anywhere: "Answer B is better", "Output (a) is preferred"
    re.compile(_NAMED + r"\s*" + _LETTER + r"\s+(?i:is\s+(?:the\s+)?(?:better|preferred|best))"),
    # anywhere: "The better answer is B", "Preferred output: (a)", "Verdict: A", "Winner: B"
    re.compile(r"(?i:(?:better|best|preferred|winning)\s+" + _NAMED + r"|verdict|winner|choice)"
               r"\s*(?i:is|would be|:)\s*(?:" + _NAMED + r"\s*)?" + _LETTER),
    # anywhere: "I prefer B", "I choose Answer A"
    re.compile(r"\bI\s+(?i:prefer|choose|pick|select)\s+(?:" + _NAMED + r"\s*)?" + _LETTER),
]
_JSON_KEYS = ("winner", "verdict", "better", "preferred", "preference", "choice", "answer",
              "best", "output", "result")
# AlpacaEval's ranking templates name the outputs model_1/model_2 (or m/M); the first is A.
_MODEL_NAMES = {"model_1": "A", "model_2": "B", "m": "A", "M": "B", "1": "A", "2": "B"}


def _verdict_from_json(content: str) -> str | None:
    """A verdict from a JSON reply (optionally in a ```json fence): {"winner": "B"},
    {"verdict": "Output (a)"}, or AlpacaEval's ranking list
    [{"model": "model_1", "rank": 2}, {"model": "model_2", "rank": 1}]."""
    m = re.search(r"[\[{].*[\]}]", content, re.DOTALL)
    if not m:
        return None
    try:
        data = json.loads(m.group(0))
    except ValueError:
        try:  # AlpacaEval's templates show Python-style single quotes
            import ast

            data = ast.literal_eval(m.group(0))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if isinstance(data, dict):
        for k, v in data.items():
            if str(k).lower() in _JSON_KEYS and isinstance(v, (str, int)):
                v = str(v).strip()
                if v in _MODEL_NAMES:
                    return _MODEL_NAMES[v]
                got = parse_verdict(v, _json=False)
                if got:
                    return got
        return None
    if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
        try:
            best = min(data, key=lambda d: float(d["rank"]))
        except (KeyError, TypeError, ValueError):
            return None
        name = str(best.get("model", best.get("output", ""))).strip()
        return _MODEL_NAMES.get(name) or parse_verdict(name, _json=False)
    return None


def parse_verdict(content: str, _json: bool = True) -> str | None:
    """'A' or 'B' from the judge's reply, or None when the reply names neither.

    Accepts a bare letter in either case ("A", "b", "(B)", "**B**", "A is better."), a named
    answer ("Answer A", "Output (a)", "Response: B", "The answer B is better", "The better answer
    is A", "Verdict: B"), AlpacaEval's "m" / "M" replies (m = the first output = A), and JSON
    ({"winner": "B"}, a ranking list [{"model": "model_1", "rank": 1}, ...]). A reply that names
    both letters in different verdict phrases, or none, is None (a failed judgment, never a loss).
    """
    s = (content or "").strip()
    bare = s.strip("()[]*\"'`.:!, \n")
    if bare.upper() in ("A", "B"):
        return bare.upper()
    if bare in ("m", "M"):
        return _MODEL_NAMES[bare]
    if _json and s[:1] in "[{`":
        got = _verdict_from_json(s)
        if got:
            return got
    text = s.lstrip("*\"'` \n#>")
    for i, pat in enumerate(_VERDICT_PATTERNS):
        m = pat.search(text) if i >= 2 else pat.match(text)
        if m:
            return next(g for g in m.groups() if g).upper()
    if _json and ("{" in s or "[" in s):
        return _verdict_from_json(s)
    return None


def _verdict_letter(token: str) -> str | None:
    t = str(token).strip().strip("()[]*\"'`").upper()
    return t if t in ("A", "B") else None


def _p_b_from_logprobs(choice: dict, verdict: str | None = None) -> float | None:
    """P(B) / (P(A) + P(B)) at the token where the judge wrote its verdict letter: the first
    generated token (AlpacaEval's weighted judge), or, when the reply starts with words ("The
    answer A ..."), the first token that is the parsed verdict. None when that token's
    alternatives name neither letter."""
    try:
        content = choice["logprobs"]["content"]
    except (KeyError, TypeError):
        return None
    if not content:
        return None
    pos = None
    for i, entry in enumerate(content[:64]):
        letter = _verdict_letter((entry or {}).get("token", ""))
        if letter is not None and (i == 0 or letter == verdict):
            pos = i
            break
    if pos is None:
        return None
    try:
        tops = content[pos].get("top_logprobs") or []
    except AttributeError:
        return None
    pa = pb = 0.0
    for t in tops:
        letter = _verdict_letter(t.get("token", ""))
        lp = t.get("logprob")
        if lp is None or letter is None:
            continue
        if letter == "A":
            pa += math.exp(lp)
        else:
            pb += math.exp(lp)
    if pa + pb <= 0:
        return None
    return pb / (pa + pb)
