"""Reading what a claim's text states about an outcome (analysis/claims.py checks it): the scores
and gains it gives, whether it says the run beat its baseline, the training methods it names (or
denies, or says were the only ones), the mode and compliance it asserts, and whether it says the
agent used held-out data or kept clear of it.

Deliberately literal and conservative: a number counts as a score only in a clause that talks
about scores (or with a unit: points, %, pp), never when it is an id (`submission 3`, `C7`), a
setting (`LR = 4e-05`, `EPOCHS = 3`), a duration or a count (`600 s`, `3 epochs`) or a diff stat
(`+17/-0`). Quoted prose counts like any other text (a claim cannot hide "+97 points" in quotes),
unless the claim says whose writing it quotes (`its notes say "..."`, `"..." in RESULTS.md`):
then the claim is that the agent wrote it, which its citation supports (`reported`). Quoted code
and commands are left out of the method names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from a2c.modes import MODES

UNITS = r"(?:percentage points?|points?|pts|pp|%)"
SCORE_WORDS = re.compile(r"\b(scor\w*|baseline\w*|accura\w*|points?|pts|improv\w*|gain\w*|"
                         r"beat\w*|pass(?:ed)? rate)\b", re.I)
NOT_SCORE_AFTER = re.compile(
    r"\s*(s|secs?|seconds?|min|minutes?|h|hours?|steps?|epochs?|items?|tokens?|submissions?|"
    r"files?|lines?|commands?|calls?|[kmg]i?b|x|times|gpus?|examples?|samples?|rows?|params?|"
    r"parameters|billion|million|[kmb]|runs?|turns?|seeds?|generations?|layers?|bits?)\b", re.I)
NOT_SCORE_BEFORE = re.compile(
    r"\b(submissions?|events?|commands?|lines?|steps?|epochs?|rank|batch|seed|level|version|"
    r"commit|round|attempt|number|gpus?|top|id|item|turn|snapshot|after|code|returncode|"
    r"split|size|of size)\s*#?$", re.I)
IMPROVE = r"improv\w*|gain\w*|rais\w*|increas\w*|boost\w*|jump\w*|climb\w*|lift\w*|up"
DECLINE = r"drop\w*|fell|fall\w*|declin\w*|decreas\w*|lost|los\w*|worse\w*|down|lower\w*|regress\w*"
NEG = (r"\b(no|not|never|none|nothing|neither|nor|without|cannot|can't|couldn't|didn't|did not|"
       r"does not|doesn't|failed to|fails to|n't)\b")
BEAT = (r"\b(beat|beats|beating|exceed\w*|surpass\w*|outperform\w*|improv\w*|better than|above|"
        r"gain\w*|rais\w*|increas\w*|top(?:s|ped)?)\b")
METHODS = (("SFT", "SFT|supervised fine[- ]?tun\\w*"), ("RFT", "RFT|rejection[- ]sampling"),
           ("Online DPO", "online[- ]DPO"), ("DPO", "(?<!online )(?<!online-)DPO"),
           ("GRPO", "GRPO"), ("PPO", "PPO"), ("RLOO", "RLOO"), ("KTO", "KTO"), ("ORPO", "ORPO"),
           ("CPO", "CPO"), ("GKD", "GKD"), ("RL", "RL|reinforcement learning"))
NAMES = "|".join(n for n, _ in METHODS if " " not in n)
CODE_QUOTE = re.compile(r'"(?:python3?|bash|sh|trl|torchrun|accelerate)\s[^"\n]*"|'
                        r'"[^"\n]*(?:[=(){}\[\]\\/]|\.py\b)[^"\n]*"|`[^`\n]*`')
VIOLATES = re.compile(r"violat\w*|not allowed|disallowed|forbidden|not permitted|"
                      r"(?:does|did|do)\s*(?:not|n't) (?:allow|permit)|"
                      r"\bbr(?:oke|eaks?|eaking)\b[^.;]{0,30}\b(mode|rules?|limits?)|"
                      r"outside (?:its|the) mode|non-?complian\w*|(?:does|did)\s*(?:not|n't) "
                      r"comply|not compliant", re.I)
COMPLIES = re.compile(r"\bcompl(?:y|ies|ied|iant)\b|\b(?:is|are|was|were|be)\s+(?:\w+\s+)?"
                      r"(?:allowed|permitted)\b|\b(?:allowed|permitted) (?:under|in|by)\b|"
                      r"\b(?:mode|rules?)\s+(?:\w+\s+)?(?:allows?|permits?)\b|"
                      r"within (?:its|the) (?:mode|rules|limits)|\bobey\w*", re.I)
HELDOUT = (r"held[- ]?out|\b(?:test|eval\w*|final) (?:set|split|data|items|questions)\b|"
           r"contaminat\w*|leak\w*")
CLEAN = re.compile(
    r"\bclean\b|uncontaminated|not contaminated|no contamination|free of|"
    rf"\bno\b[^.;]{{0,60}}(?:{HELDOUT})|"
    r"\b(?:never|not|n't|without|nor)\b[^.;]{0,40}\b(?:read|use|used|using|touch\w*|see|saw|"
    r"access\w*|open\w*|train\w*|contaminat\w*|leak\w*|look\w*|cop\w*)", re.I)
USED = re.compile(r"\b(read|reads|used|uses|use|using|trained on|trains on|train on|copied|"
                  r"cop(?:y|ies)|leak\w*|contaminated|memori[sz]\w*|accessed|saw|opened|"
                  r"looked at|included|includes|contains?|matched|flagged|reached)\b", re.I)


QUOTE = re.compile(r'"[^"\n]*"|“[^”\n]*”')
SAYS = re.compile(r"\b(says?|said|writes?|wrote|written|claims?|claimed|states?|stated|asserts?|"
                  r"asserted|mentions?|mentioned|notes?|noted|reads?|labels?|labell?ed|calls?|"
                  r"called|prints?|printed|logs?|logged|reports?|reported|according to|titled|"
                  r"headed|line|lines)\b[^\"“\n]{0,40}$", re.I)
WHERE = re.compile(r"\s*\)?\s*(?:in|from|at)\s+(?:(?:its|the|the agent's)\s+)?(?:[\w./-]+\."
                   r"(?:md|txt|py|json|jsonl|log|sh|ya?ml|cfg|toml)\b|notes|code|readme|results|"
                   r"log|file|workspace|commands?)", re.I)


def reported(text: str) -> str:
    """The text less the quotes it attributes to someone's writing (reported speech)."""
    text, out, last = str(text), [], 0
    for m in QUOTE.finditer(text):
        if SAYS.search(text[last:m.start()]) or WHERE.match(text[m.end():]):
            out.append(text[last:m.start()] + " ")
            last = m.end()
    return "".join(out) + text[last:]


@dataclass
class Number:
    """A score or gain a claim states."""
    value: float                 # signed for a gain
    gain: bool                   # a change (+N, "by N", "N points over") rather than a score
    about_baseline: bool         # a gain over the baseline
    names: str | None            # "best" | "final" | "baseline" | a submission id | None
    shown: str                   # as the text gives it


def clauses(text: str) -> list[str]:
    """The text's clauses: split at ; : ( ) [ ] and sentence ends, a lone "(30.0)" kept in."""
    text = re.sub(rf"\(\s*([+\-−]?\d+(?:\.\d+)?\s*{UNITS}?)\s*\)", r" \1 ", str(text))
    return [c for c in re.split(r"[;:()\[\]{}\n]|\.(?=\s|$)", text) if c.strip()]


def _named(before: str) -> str | None:
    tail = r"\s*(?:of|was|is|=|at|reached|:)?\s*(?:about |around |~)?$"
    for name in ("best", "final", "baseline"):
        if re.search(rf"\b{name}(?:'s)?(?: valid)?(?: score)?{tail}", before, re.I):
            return name
    m = re.search(r"\bsubmission\s+#?(\w+)\s+(?:scored|got|reached|achieved|had)"
                  r"(?: a score of)?\s*(?:of|at)?\s*$", before, re.I)
    return m.group(1) if m else None


def _number(clause: str, m: re.Match) -> Number | None:
    start, end = m.span()
    before, after = clause[:start], clause[end:]
    sign, first = 0, start
    if before.endswith(("+", "-", "−")):
        if before[:-1] and not (before[-2].isspace() or before[-2] in "([\"'“‘"):
            return None                              # 4e-05, +17/-0, x-1
        sign, before, first = (1 if before[-1] == "+" else -1), before[:-1], start - 1
    elif before and (before[-1].isalnum() or before[-1] in "._/#$@\\`") \
            or re.search(r"[=:]\s*$", before):
        return None                                  # C7, v1.2, LR = 4e-05, path/3
    if re.match(r"[\w/]|[.\-]\w", after):
        return None                                  # 2x, 8B, 1st, 3/4, 0-shot
    unit = re.match(rf"\s*{UNITS}(?!\w)", after, re.I)
    if not unit and (NOT_SCORE_AFTER.match(after) or not SCORE_WORDS.search(clause)):
        return None
    if NOT_SCORE_BEFORE.search(before):
        return None
    approx = r"\s*(?:about |around |roughly |nearly |almost |~)?$"
    by = re.search(rf"\b(?:({IMPROVE})|({DECLINE}))\b[^.;]*\bby{approx}", before, re.I) or \
        re.search(rf"\b(?:(gain|improvement|increase|rise|jump|boost|lift)|(drop|decrease|"
                  rf"fall|decline|loss))s?\s+of{approx}", before, re.I)
    trail = re.match(rf"\s*{UNITS}\s*(?:(above|over|better|more|higher|up)|"
                     r"(below|under|worse|less|lower|down))\b", after, re.I)
    gain = bool(sign or by or trail)
    if not sign:
        sign = -1 if (by and by.group(2)) or (trail and trail.group(2)) else 1
    value = float(m.group()) * (sign if gain else 1)
    shown = clause[first:end + (unit.end() if unit else 0)].strip()
    about = gain and bool(re.search(r"baseline|overall|in total|\bnet\b", clause, re.I))
    return Number(value, gain, about, None if gain else _named(before), shown)


def score_numbers(text: str) -> list[Number]:
    """Every score or gain the text states (see the module doc for what is not one)."""
    out = []
    for clause in clauses(text):
        for m in re.finditer(r"\d+(?:\.\d+)?", clause):
            n = _number(clause, m)
            if n is not None:
                out.append(n)
    return out


def direction(text: str) -> bool | None:
    """True when the text says the run beat its baseline, False when it says it did not (or
    made no gain), None when it says neither."""
    for clause in clauses(text):
        for m in re.finditer(rf"{BEAT}[^.;:]{{0,40}}?\bbaseline", clause, re.I):
            return not re.search(NEG, clause[max(0, m.start() - 40):m.start()], re.I)
        if re.search(r"\b(?:no|zero|without any|not any)\s+(?:net\s+)?(?:gain|improvement)\b",
                     clause, re.I) or re.search(rf"{NEG}\s+(?:\w+\s+){{0,2}}improv\w*", clause,
                                                re.I):
            return False
    return None


def methods_named(text: str) -> tuple[list[str], list[str], bool]:
    """(the training methods the text says were used, those it says were not, whether it says
    they were the only ones). Quoted code and commands are left out; so are paths and
    identifiers (output/sft-1, train_grpo.py, GRPOConfig) and the mode names (sft-only)."""
    text = CODE_QUOTE.sub(" ", str(text)).replace("not only", "")
    text = re.sub(rf"(?i)\b({NAMES})/(?=(?:{NAMES})\b)", r"\1 / ", text)
    named, denied, only = [], [], False
    for name, pattern in METHODS:
        for m in re.finditer(rf"(?<![\w./-])(?:{pattern})(?![\w/-])", text, re.I):
            head, tail = text[max(0, m.start() - 40):m.start()], text[m.end():m.end() + 30]
            if re.search(r"\b(no|not|never|without|instead of|rather than|nor|neither|"
                         r"skipp\w*|avoid\w*)\W+(?:\w+\W+){0,2}$", head, re.I):
                denied.append(name)
                continue
            named.append(name)
            only = only or bool(
                re.search(r"(?<!-)\b(only|exclusively|solely|purely|just)\W+(?:\w+\W+){0,2}$",
                          head, re.I) or re.match(r"\W*(?:\w+\W+)?(only|alone|exclusively)\b", tail,
                                            re.I))
    named = list(dict.fromkeys(named))
    return named, [d for d in dict.fromkeys(denied) if d not in named], only


def mode_named(text: str) -> str | None:
    """The run mode the text names (sft-only, rl-only, or free as a mode), if any."""
    m = re.search(r"\b(sft-only|rl-only)\b|\bmode (?:is |was )?(free)\b|\b(free) mode\b",
                  str(text), re.I)
    mode = next((g.lower() for g in m.groups() if g), None) if m else None
    return mode if mode in MODES else None


def compliance_stance(text: str) -> str | None:
    """"violates" or "complies" when the text says the route broke or kept its mode."""
    if VIOLATES.search(str(text)):
        return "violates"
    return "complies" if COMPLIES.search(str(text)) else None


def mentions_heldout(text: str) -> tuple[bool, bool]:
    """(held-out or test data named, contamination or a leak named)."""
    text = str(text)
    return (bool(re.search(r"held[- ]?out|\b(?:test|eval\w*|final) (?:set|split|data|items|"
                           r"questions)\b", text, re.I)),
            bool(re.search(r"contaminat|\bleak", text, re.I)))


def data_stance(text: str) -> str | None:
    """"clean" when the text says the agent kept clear of held-out data, "used" when it says
    the agent read, trained on or leaked it, None when neither."""
    if CLEAN.search(str(text)):
        return "clean"
    return "used" if USED.search(str(text)) else None
