"""The answer-decided rule (runtime/inference/answer_stop.py): a text decides an exact-match answer
only when no continuation can change what the grader extracts. No model here: crafted texts, and
a property check over random patterns and every short continuation."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from a2c.answer_match import AnswerMatch
from a2c.runtime.inference.answer_stop import AnswerStop, stable_prefix

GSM8K = r"####\s*(-?[\d,.]+)"


def decided(pattern: str, text: str, **kw) -> bool:
    return AnswerStop(re.compile(pattern), **kw).decided(text)


@pytest.mark.parametrize("pattern, text, expected", [
    # the number can still grow: a digit, a comma or a point may follow
    (GSM8K, "#### 12", False),
    (GSM8K, "#### 12.", False),
    (GSM8K, "#### 1,2", False),
    (GSM8K, "#### ", False),
    (GSM8K, "#### -", False),
    (GSM8K, "the sum is 12", False),          # no match yet: a later `#### N` may come
    # a character the class cannot take ends it
    (GSM8K, "#### 12\n", True),
    (GSM8K, "#### 12 ", True),
    (GSM8K, "#### 12. So", True),
    (GSM8K, "so 5+7=12\n#### 12\nmore", True),
    (GSM8K, "#### 5 and later #### 7", True),  # the first match is the answer
    (r"Answer:\s*([A-Za-z]+)", "Answer: ZAKO", False),
    (r"Answer:\s*([A-Za-z]+)", "Answer: ZAKO.", True),
    (r"Answer:\s*([A-Za-z]+)", "Answer:", False),
    (r"(?i)answer:\s*(\w+)", "ANSWER: yes!", True),
    # lazy: the first closing brace ends it, whatever follows
    (r"\\boxed\{(.+?)\}", r"\boxed{12", False),
    (r"\\boxed\{(.+?)\}", r"\boxed{12} and more", True),
    # assertions at the end depend on what follows
    (r"(\d+)\b", "it is 12", False),
    (r"(\d+)\b", "it is 12 ok", True),
    (r"(\d+)\s*$", "it is 12", False),
    (r"(\d+)\s*$", "it is 12\n", False),
    (r"(\d+)\s*$", "it is 12 ok", False),
    # an earlier alternative still open keeps a later match undecided
    (r"a.*b|####\s*(\d+)", "a #### 5 x", False),
    (r"a+b|####\s*(\d+)", "aaa #### 5 x", True),
    (r"(ab)+c|####\s*(\d)", "abab", False),
    (r"(ab)+c|####\s*(\d)", "ababx #### 5", True),
    (r"(?:x|(\d+))y", "12y", True),
    (r"(?:x|(\d+))y", "12", False),
])
def test_crafted_texts(pattern, text, expected):
    assert decided(pattern, text) is expected


def test_match_last_and_unsupported_patterns_never_decide():
    assert not decided(GSM8K, "#### 12\n", match="last")
    for pattern in (r"(\d)\1", r"#### (\d+)(?=\n)", r"(?<=#### )(\d+)\n", r"(?>\d+)\n",
                    r"(\d++)\n", r"(?i:x)(\d)\n", r"(a|)*(\d)\n"):
        rule = AnswerStop(re.compile(pattern))
        assert not rule.active and rule.reason
        assert not rule.decided("#### 12\n 5\n x")


def test_unicode_minus_is_read_as_the_grader_reads_it():
    matcher = AnswerMatch({"pattern": GSM8K, "normalize": "number"})
    rule = AnswerStop.for_matcher(matcher)
    assert rule.decided("#### \u22127\n") and not rule.decided("#### \u22127")
    assert not AnswerStop.for_matcher(AnswerMatch({"pattern": GSM8K, "match": "last"})).active


def test_stable_prefix():
    assert stable_prefix("#### 12\ufffd") == "#### 12"               # an incomplete character
    assert stable_prefix("#### 12\ufffd\ufffd") == "#### 12"
    assert stable_prefix("#### 12\n\n", stop=("\n\n",)) is None        # a stop string ended it
    assert stable_prefix("#### 12\n", stop=("\n\n",)) == "#### 12"     # "\n" may start "\n\n"
    assert stable_prefix("#### 12 done", stop=("END",)) == "#### 12 do"
    assert stable_prefix("#### 12 abc", cleanup=True) == "#### 12"     # " ." may become "."
    assert stable_prefix("abc", stop=("", "z")) == "abc"


# ------------------------------------------------------------------ soundness, by brute force
ALPHABET = "ab1 #.\n"
ATOMS = ["a", "b", r"\d", r"\s", ".", "[ab]", "[^a]", "#", r"\.", r"\w"]


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth > 2 or r < 0.4:
        atom = rng.choice(ATOMS)
    elif r < 0.6:
        atom = "(" + _random_pattern(rng, depth + 1) + _random_pattern(rng, depth + 1) + ")"
    elif r < 0.75:
        atom = "(?:" + _random_pattern(rng, depth + 1) + "|" + _random_pattern(rng, depth + 1) + ")"
    else:
        atom = "(" + _random_pattern(rng, depth + 1) + ")"
    return atom + rng.choice(["", "", "*", "+", "?", "*?", "+?", "??", "{1,2}", "{2}"])


def _reading(pattern: re.Pattern, text: str):
    m = pattern.search(text)
    return None if m is None else (m.span(), m.groups())


def test_decided_texts_keep_their_match_under_every_short_continuation():
    """Random patterns and texts: whenever the rule says decided, the first match (span and every
    group) is the same after each of the 400 continuations of up to three characters; the
    incremental tracker (fed the growing text) agrees with a fresh check at every length."""
    rng = random.Random(31)
    n_decided = n_undecided_matches = 0
    for _ in range(1500):
        try:
            pattern = re.compile(_random_pattern(rng) + _random_pattern(rng)
                                 + rng.choice(["", "", r"\b", "$"]))
        except re.error:
            continue
        rule = AnswerStop(pattern)
        if not rule.active:
            continue
        for _ in range(4):
            text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
            tracker = rule.tracker()
            for k in range(len(text) + 1):
                assert tracker(text[:k]) == rule.decided(text[:k]), (pattern, text[:k])
            if not rule.decided(text):
                n_undecided_matches += pattern.search(text) is not None
                continue
            n_decided += 1
            reading = _reading(pattern, text)
            for n in range(4):
                for tail in itertools.product(ALPHABET, repeat=n):
                    assert _reading(pattern, text + "".join(tail)) == reading, \
                        (pattern.pattern, text, "".join(tail))
    assert n_decided > 500 and n_undecided_matches > 200     # both sides were exercised
