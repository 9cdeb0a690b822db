"""The held-out items as one index, and what one text of the agent's matches (the contamination
check, analysis/contamination.py; docs/analysis.md, "Contamination").

An item is found by its words as written — the token `N`-grams of its texts, less those the agent
split holds — or, when its wording did not survive, by its signature: its numbers together (the
prompt's numbers and the gold answer, as one run of consecutive numbers: `Add 47 and 38 ... ####
85`, `47+38=85`) or its distinctive words with its numbers (a paraphrase). A signature the agent
split itself matches is dropped. Every text is read as written, decoded (base64, hex, %-encoding,
HTML entities) and backwards (analysis/normalize.py).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .normalize import DEPTH, DIGITS, STOPWORDS, canonical, is_number, stem, tokens_both, variants
from .normalize import tokens as canonical_tokens

N = 8                   # tokens per n-gram
ITEM_SHARE = 0.5        # share of an item's distinctive grams one text must hold
NUM_MIN = 3             # numbers (operands and answer) a numeric signature holds at least ...
NUM_MAX = 16            # ... and at most
NUM_WEIGHT = 5          # ... and significant digits in all (47 -> 2, 40 -> 1, 2.5 -> 2)
NUM_SLACK_FROM = 5      # a signature of this many distinct numbers tolerates one other number
NUM_SPAN = 48           # tokens a numeric run may reach from its anchor (or 3x the item's span)
WORD_SHARE = 0.5        # share of an item's distinctive words a word signature needs ...
WORD_NEED_MAX = 8       # ... at most this many
WORD_MIN = 4            # distinctive words a word signature needs (5 with fewer than 2 numbers)
WORD_COMMON = 0.01      # a word in this share of the agent split's texts (or 2) is not distinctive
PROMPT_KEYS = ("prompt", "question", "instruction", "input", "problem")   # the first one present
BY_RANK = {"ngrams": 0, "words": 1, "numbers": 2}     # evidence, strongest first


def normalise(text: str) -> str:
    """The canonical text (analysis/normalize.py): escapes undone, NFKC, casefold, punctuation and
    `_` to spaces, numbers canonical (1,234 -> 1234, 7.0 -> 7, three -> 3), whitespace collapsed."""
    return canonical(text)


def tokens(text: str) -> list[str]:
    return canonical_tokens(text)


def grams(toks: list[str], lengths: Iterable[int]) -> set[int]:
    """Hashes of every run of each length in `lengths` (hash() of a tuple: stable in a process)."""
    out: set[int] = set()
    for length in lengths:
        if len(toks) >= length > 0:
            out.update(map(hash, zip(*[toks[i:] for i in range(length)])))
    return out


def item_texts(item: dict[str, Any]) -> list[str]:
    """The texts of one item that can identify it: its prompt, its answer when long enough."""
    texts = []
    prompt = next((item[k] for k in PROMPT_KEYS if isinstance(item.get(k), str)), None)
    if prompt and prompt.strip():
        texts.append(prompt)
    answer = item.get("answer")
    if isinstance(answer, str) and len(tokens(answer)) >= N:
        texts.append(answer)
    return texts


def gold_number(answer: Any) -> str | None:
    """The gold answer's number, canonical: a bare number, or the number after the last `####`
    (GSM8K's worked answers); None for any other answer."""
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        return None
    text = str(answer)
    if "####" in text:
        text = text.rsplit("####", 1)[1]
        toks = tokens(text)[:1]
    else:
        toks = tokens(text)
    return toks[0] if len(toks) == 1 and is_number(toks[0]) else None


def _weight(number: str) -> int:
    """Significant digits: 47 -> 2, 40 -> 1, 1200 -> 2, 2.5 -> 2, 0.5 -> 1."""
    return len(number.replace(".", "").strip("0")) or 1


@dataclass(frozen=True)
class NumberSignature:
    """An item's numbers (its prompt's, and its gold answer): found as one run of consecutive
    numbers of a text (words between them, in any order, repeats allowed) that holds every one of
    them, at least `count` numbers long, reaching at most `span` tokens from the `anchor` (its
    rarest number), with at most `slack` other numbers inside."""
    owner: str
    numbers: frozenset[str]
    count: int
    anchor: str
    slack: int
    span: int


@dataclass(frozen=True)
class WordSignature:
    """An item's distinctive words (stems of its prompt's words that are not stop words and are
    rare in the agent split) and its prompt's numbers: `need` of the words within `span` tokens,
    and all the numbers but `missing` within `span` tokens of them."""
    owner: str
    words: frozenset[str]
    numbers: frozenset[str]
    need: int
    missing: int
    span: int


def signatures(item_id: str, prompt: str, gold: str | None, frequency: Callable[[str], int],
               limit: float = 2) -> list[NumberSignature | WordSignature]:
    """The signatures of one item: what identifies it when its wording does not survive.
    `frequency(token)`: in how many agent-split texts it occurs; `limit`: from there a word is
    common."""
    toks = tokens(prompt)
    numbers = [t for t in toks if is_number(t)]
    out: list[NumberSignature | WordSignature] = []
    own = toks + [gold] if gold is not None else toks
    places = [i for i, t in enumerate(own) if is_number(t)]
    span = max(NUM_SPAN, 3 * (places[-1] - places[0])) if places else NUM_SPAN
    keys = []
    if gold is not None:
        keys.append(tuple(sorted(numbers + [gold])))
    if len(numbers) >= NUM_MIN:
        keys.append(tuple(sorted(numbers)))
    for key in dict.fromkeys(keys):
        distinct = frozenset(key)
        if NUM_MIN <= len(key) <= NUM_MAX and len(distinct) >= 2 \
                and sum(map(_weight, key)) >= NUM_WEIGHT:
            anchor = min(distinct, key=lambda t: (frequency(t), -_weight(t), t))
            out.append(NumberSignature(item_id, distinct, min(len(key), len(distinct) + 1),
                                       anchor, int(len(distinct) >= NUM_SLACK_FROM), span))
    words = frozenset(stem(t) for t in toks if not is_number(t) and len(t) >= 3
                      and t not in STOPWORDS and frequency(t) < limit)
    distinct = frozenset(numbers)
    if len(words) >= WORD_MIN + (len(distinct) < 2):
        out.append(WordSignature(item_id, words, distinct,
                                 min(WORD_NEED_MAX, math.ceil(WORD_SHARE * len(words))),
                                 int(len(distinct) >= 3), max(2 * len(toks), len(toks) + 16)))
    return out


@dataclass
class ItemIndex:
    """The held-out items as one table of hashed grams (gram -> the item texts holding it), and
    their signatures: numeric (operands and answer) and distinctive words."""

    n: int = N
    share: float = ITEM_SHARE
    table: dict[int, list[int]] = field(default_factory=dict)
    needed: list[int] = field(default_factory=list)      # per item text: grams to match
    owner: list[str] = field(default_factory=list)       # per item text: the item's id
    lengths: set[int] = field(default_factory=set)
    indistinct: list[str] = field(default_factory=list)
    numeric: dict[str, list[NumberSignature]] = field(default_factory=dict)    # by anchor
    wordsigs: list[WordSignature] = field(default_factory=list)
    vocab: dict[str, list[int]] = field(default_factory=dict)   # token -> word signatures
    excluded: int = 0           # signatures the agent split itself matches: dropped
    depth: int = DEPTH          # decoders applied this deep (0: the text as it is)
    gram_sets: set[frozenset[str]] = field(default_factory=set)   # each gram's tokens

    @classmethod
    def build(cls, items: Iterable[tuple[Any, ...]], allowed: Iterable[str] = (),
              n: int = N, share: float = ITEM_SHARE) -> ItemIndex:
        """`items`: (id, texts) or (id, texts, gold answer); the first text is the prompt, and a
        later one a long answer whose `#### N` is the gold number when none is given. `allowed`:
        texts whose grams and signatures are no evidence (the agent split)."""
        index = cls(n=n, share=share)
        rows = [(str(it[0]), list(it[1]), it[2] if len(it) > 2 else None) for it in items]
        toks = [(item_id, [tokens(t) for t in texts]) for item_id, texts, _ in rows]
        index.lengths = {n} | {len(t) for _, ts in toks for t in ts if 0 < len(t) < n}
        common: set[int] = set()
        docs = 0
        frequency: dict[str, int] = {}
        allowed_toks: list[str] = []
        for text in allowed:
            t = tokens(text)
            common |= grams(t, index.lengths)
            allowed_toks += t
            docs += 1
            for word in set(t):
                frequency[word] = frequency.get(word, 0) + 1
        limit = max(2, WORD_COMMON * docs)
        often = lambda tok: frequency.get(tok, 0)  # noqa: E731
        usable: set[str] = set()
        for item_id, texts in toks:
            for t in texts:
                own = grams(t, [n] if len(t) >= n else [len(t)]) - common
                if not own:
                    continue
                usable.add(item_id)
                slot = len(index.needed)
                index.needed.append(max(1, math.ceil(share * len(own))))
                index.owner.append(item_id)
                for g in own:
                    index.table.setdefault(g, []).append(slot)
                length = n if len(t) >= n else len(t)
                index.gram_sets |= {frozenset(run) for run in zip(*[t[i:] for i in range(length)])
                                    if hash(run) in own}
        sigs = []
        for item_id, texts, gold in rows:
            if not texts:
                continue
            if gold is None and len(texts) > 1:
                gold = texts[1]
            sigs += signatures(item_id, texts[0], gold_number(gold), often, limit)
        index._add(sigs)
        if allowed_toks and sigs:         # what the agent split itself matches is no evidence
            held = index._signature_hits(allowed_toks)
            kept = [s for s in sigs if (s.owner, _kind(s)) not in held]
            index.excluded = len(sigs) - len(kept)
            if index.excluded:
                index.numeric, index.wordsigs, index.vocab = {}, [], {}
                index._add(kept)
            sigs = kept
        index.indistinct = [item_id for item_id, _, _ in rows if item_id not in usable
                            and not any(s.owner == item_id for s in sigs)]
        return index

    @classmethod
    def from_items(cls, rows: Iterable[dict[str, Any]], allowed: Iterable[str] = ()
                   ) -> ItemIndex:
        """The index of item records (held-out/final rows): texts, and gold answers."""
        return cls.build([(str(it.get("id")), item_texts(it), it.get("answer")) for it in rows],
                         allowed)

    def _add(self, sigs: list[NumberSignature | WordSignature]) -> None:
        for sig in sigs:
            if isinstance(sig, NumberSignature):
                self.numeric.setdefault(sig.anchor, []).append(sig)
            else:
                slot = len(self.wordsigs)
                self.wordsigs.append(sig)
                for tok in sig.words | sig.numbers:
                    self.vocab.setdefault(tok, []).append(slot)

    @property
    def signature_count(self) -> dict[str, int]:
        return {"numbers": sum(len(v) for v in self.numeric.values()),
                "words": len(self.wordsigs), "excluded": self.excluded}

    def _signature_hits(self, toks: list[str], numbers: bool = True
                        ) -> dict[tuple[str, str], None]:
        """(item id, "numbers" | "words") of the signatures these tokens match (`numbers`:
        False for reversed text, whose numbers read backwards are other numbers)."""
        found: dict[tuple[str, str], None] = {}
        if self.numeric and numbers:
            numbers_in = {t for t in set(toks) if t[0] in DIGITS and is_number(t)}
            nums = [(i, t) for i, t in enumerate(toks) if t in numbers_in]
            for j, (_, tok) in enumerate(nums):
                for sig in self.numeric.get(tok, ()):
                    if (sig.owner, "numbers") not in found and _number_run(sig, nums, j):
                        found[(sig.owner, "numbers")] = None
        if self.wordsigs:
            present: dict[str, list[int]] = {}
            vocab = self.vocab
            for i, t in enumerate(toks):
                key = t if t[0] in DIGITS else stem(t)
                if key in vocab:
                    present.setdefault(key, []).append(i)
            counts: dict[int, int] = {}
            for t in present:
                for slot in vocab[t]:
                    counts[slot] = counts.get(slot, 0) + 1
            for slot, count in counts.items():
                sig = self.wordsigs[slot]
                if (sig.owner, "words") in found or \
                        count < sig.need + len(sig.numbers) - sig.missing or \
                        len(sig.numbers - present.keys()) > sig.missing:
                    continue
                if _word_window(sig, present):
                    found[(sig.owner, "words")] = None
        return found

    def _match_tokens(self, toks: list[str], numbers: bool = True) -> dict[str, str]:
        """{item id: "ngrams" | "words" | "numbers"} of what one text's tokens match."""
        found: dict[str, str] = {}
        if self.table:
            counts: dict[int, int] = {}
            for g in grams(toks, self.lengths) & self.table.keys():
                for slot in self.table[g]:
                    counts[slot] = counts.get(slot, 0) + 1
            for s, c in counts.items():
                if c >= self.needed[s]:
                    found[self.owner[s]] = "ngrams"
        for item_id, by in self._signature_hits(toks, numbers):
            if BY_RANK[by] < BY_RANK.get(found.get(item_id, ""), 9):
                found[item_id] = by
        return found

    @property
    def empty(self) -> bool:
        return not (self.table or self.numeric or self.wordsigs)

    def match_detail(self, text: str) -> dict[str, tuple[str, str]]:
        """{item id: (by, decoded)} for the items this one text matches: `by` the strongest
        evidence ("ngrams", "words", "numbers"), `decoded` the decoders that revealed it ("" for
        the text as written, "base64", "reversed", "hex+reversed", ...)."""
        found: dict[str, tuple[str, str]] = {}
        if self.empty:
            return found
        for how, variant in variants(text, self.depth):
            forward, backward = tokens_both(variant)
            for item_id, by in self._match_tokens(forward).items():
                if item_id not in found or BY_RANK[by] < BY_RANK[found[item_id][0]]:
                    found[item_id] = (by, how)
            # Read backwards only when some gram's words all occur so (reversed text holds them;
            # other text read backwards is mostly not words). Digits read backwards are other
            # numbers: no numeric signature backwards.
            present = set(backward)
            if not any(g <= present for g in self.gram_sets):
                continue
            for item_id, by in self._match_tokens(backward, numbers=False).items():
                if item_id not in found or BY_RANK[by] < BY_RANK[found[item_id][0]]:
                    found[item_id] = (by, f"{how}+reversed" if how else "reversed")
        return found

    def match(self, text: str) -> set[str]:
        """The ids of the items this one text matches (as written or decoded)."""
        return set(self.match_detail(text))


def _kind(sig: NumberSignature | WordSignature) -> str:
    return "numbers" if isinstance(sig, NumberSignature) else "words"


def _number_run(sig: NumberSignature, nums: list[tuple[int, str]], j: int) -> bool:
    """The run of numbers around `nums[j]` (the anchor) holds the signature (its docstring)."""
    origin = nums[j][0]
    for order in ((-1, 1), (1, -1)):
        seen = {nums[j][1]}
        length, slack = 1, sig.slack
        for step in order:
            k = j + step
            while 0 <= k < len(nums) and abs(nums[k][0] - origin) <= sig.span:
                if nums[k][1] in sig.numbers:
                    seen.add(nums[k][1])
                    length += 1
                elif slack:
                    slack -= 1
                else:
                    break
                k += step
        if length >= sig.count and len(seen) == len(sig.numbers):
            return True
        if not sig.slack:
            return False
    return False


def _word_window(sig: WordSignature, present: dict[str, list[int]]) -> bool:
    """`sig.need` distinct words within `sig.span` tokens, and the signature's numbers (all but
    `sig.missing`) within `sig.span` tokens of them."""
    events = sorted((p, w) for w in sig.words if w in present for p in present[w])
    inside: dict[str, int] = {}
    left = 0
    for pos, word in events:
        inside[word] = inside.get(word, 0) + 1
        while pos - events[left][0] > sig.span:
            gone = events[left][1]
            inside[gone] -= 1
            if not inside[gone]:
                del inside[gone]
            left += 1
        if len(inside) < sig.need:
            continue
        lo, hi = events[left][0], pos
        absent = sum(1 for num in sig.numbers if num not in present
                     or not _near(present[num], hi - sig.span, lo + sig.span))
        if absent <= sig.missing:
            return True
    return False


def _near(positions: list[int], low: int, high: int) -> bool:
    i = bisect.bisect_left(positions, low)
    return i < len(positions) and positions[i] <= high
