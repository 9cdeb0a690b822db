"""The answer format: how a correct answer is written, stated once by the task's grader.

A level-1 `exact_match` task reads the answer out of the model's output with a regular expression
(`pattern`, group 1). What the model must *write* is the inverse: a target template such as
`Answer: {answer}` or `#### {answer}`. The task states it once (`grader.params.answer_format`), or
the compiler derives it from the pattern when the pattern's text around group 1 is plain literal
text (`Answer:\\s*([A-Za-z]+)` -> `Answer: {answer}`); the compiler then checks that every gold
answer written in that format is read back to itself, the instructions show it, `run_meta.json`
hands it to every agent, and the reference agents train on it. Without it an agent guesses the
format, which is the prompt/evaluation mismatch the paper names as the costliest agent mistake.

Shared by the compiler (derivation, the compile-time round trip) and the CLI (`a2c check`); the
runtime's grader stays the one authority on scoring, so `a2c check` scores the same targets
through the real grader. The round trip here mirrors the grader's extraction and its three
normalisation modes closely enough to catch a pattern that cannot read its own gold answers at
compile time, without importing the runtime (docs/architecture.md, the dependency rule).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

PLACEHOLDER = "{answer}"

# Escapes that stand for one literal character, and whitespace escapes written as one space.
_WHITESPACE = {r"\s", r"\s*", r"\s+", r"\s?", " *", " +", " ?", r"\ *", r"\ +"}
_ZERO_WIDTH = {r"\b", r"\A", r"\Z"}
_META = set(".^$*+?{}[]|()")


def render(answer_format: str, answer: str) -> str:
    """The target text for one answer (plain replacement: braces elsewhere stay as written)."""
    return answer_format.replace(PLACEHOLDER, str(answer))


def _literal(part: str, *, at_start: bool, at_end: bool) -> str | None:
    """The one text that `part` (a regex fragment) stands for, or None when it allows several."""
    out, i = [], 0
    while i < len(part):
        for ws in sorted(_WHITESPACE, key=len, reverse=True):
            if part.startswith(ws, i):
                out.append(" ")
                i += len(ws)
                break
        else:
            ch = part[i]
            if ch == "\\" and i + 1 < len(part):
                pair = part[i:i + 2]
                nxt = part[i + 1]
                if pair in _ZERO_WIDTH:
                    i += 2
                    continue
                if nxt.isalnum():      # \d, \w, \n, \1 ...: a class or a reference
                    return None
                out.append(nxt)
                i += 2
            elif ch == "^" and at_start and i == 0:
                i += 1
            elif ch == "$" and at_end and i == len(part) - 1:
                i += 1
            elif ch in _META:
                return None
            else:
                out.append(ch)
                i += 1
            if i < len(part) and part[i] in "*+?{":   # a quantified literal: ambiguous
                return None
    return "".join(out)


def _group_one_span(pattern: str) -> tuple[int, int] | None:
    """(start, end) of capture group 1 in the pattern text, or None when it is not the first
    parenthesis (a non-capturing group or a lookaround before it makes the prefix ambiguous)."""
    i, depth, start, in_class = 0, 0, None, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1
        elif ch == "(":
            if start is None:
                named = pattern.startswith("(?P<", i)
                if pattern.startswith("(?", i) and not named:
                    return None
                start, depth = i, 1
            else:
                depth += 1
        elif ch == ")" and start is not None:
            depth -= 1
            if depth == 0:
                return start, i + 1
        i += 1
    return None


def derive(pattern: str) -> str | None:
    """The answer format a pattern implies, or None when its text around group 1 is not plain.

    `####\\s*(-?[\\d,.]+)` -> `#### {answer}`; `Answer:\\s*(.+)` -> `Answer: {answer}`;
    `\\\\boxed\\{(.+?)\\}` -> `\\boxed{{answer}}`; `(?:Answer|Final):\\s*(\\w+)` -> None (state
    the format). A trailing quantified suffix (`\\s*$`) is dropped, the rest must be literal.
    """
    span = _group_one_span(pattern)
    if span is None:
        return None
    start, end = span
    suffix_text = pattern[end:]
    if re.fullmatch(r"(\\s[*?]|\s[*?])?\$?", suffix_text):
        suffix_text = ""
    prefix = _literal(pattern[:start], at_start=True, at_end=False)
    suffix = _literal(suffix_text, at_start=False, at_end=True)
    if prefix is None or suffix is None:
        return None
    fmt = f"{prefix}{PLACEHOLDER}{suffix}".strip(" ") if prefix.strip() or suffix.strip() \
        else PLACEHOLDER
    return fmt


# ------------------------------------------------------------------ the compile-time round trip

def gold_of(answer_text: str, answer_pattern: re.Pattern) -> str:
    """The gold answer as the grader reads it: the last match's group 1, else the whole text."""
    matches = list(answer_pattern.finditer(answer_text))
    if matches:
        m = matches[-1]
        return (m.group(1) if m.groups() else m.group(0)).strip()
    return answer_text.strip()


def extract(text: str, pattern: re.Pattern, match: str = "first") -> str | None:
    matches = list(pattern.finditer(text or ""))
    if not matches:
        return None
    m = matches[0] if match == "first" else matches[-1]
    return (m.group(1) if m.groups() else m.group(0)).strip()


_NUMBER = re.compile(r"[-+]?\s?[$\u20ac\u00a3]?\s?(?:\d[\d,]*(?:\.\d+)?|\.\d+)%?")


def normalize(text: str | None, mode: str = "number") -> str | None:
    """The grader's three normalisation modes, in brief (runtime/graders/exact_match.py is the
    authority; `a2c check` compares against it)."""
    if text is None:
        return None
    s = text.strip()
    if mode == "text":
        return " ".join(s.replace("\u2212", "-").casefold().split())
    if mode != "number":
        return s
    m = _NUMBER.search(s.replace("\u2212", "-"))
    if not m:
        return s.strip(" .,;:!?()[]{}*\"'`_")
    s = re.sub(r"[$\u20ac\u00a3%,\s]", "", m.group(0)).lstrip("+")
    try:
        s = format(Decimal(s).normalize(), "f")
    except InvalidOperation:
        return s
    return "0" if s in ("-0", "-0.0") else s


def round_trip(answer_format: str, gold_text: str, *, pattern: str, answer_pattern: str | None,
               normalize_mode: str = "number", match: str = "first") -> tuple[bool, str, str | None]:
    """(ok, target, what the pattern reads back) for one gold answer written in the format."""
    compiled = re.compile(pattern)
    gold = gold_of(str(gold_text), re.compile(answer_pattern) if answer_pattern else compiled)
    target = render(answer_format, gold)
    got = extract(target, compiled, match)
    ok = got is not None and got != "" and normalize(got, normalize_mode) == normalize(
        gold, normalize_mode)
    return ok, target, got
