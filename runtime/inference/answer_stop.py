"""Stop generating a sequence once the grader's answer is decided (issue 31).

An exact-match grader reads one answer out of an output: the first match of its `pattern`
(group 1), else, with `fallback: last_number`, the last number. A greedy grader that generates
on after that answer can no longer change wastes time on the longest members of every batch.
`AnswerStop` says when the text generated so far already fixes the answer, so the engine may end
that sequence and the score stays what the unstopped output would have scored.

**The rule.** A text T *decides* the answer when, for every string s, the grader's extraction
from T + s equals its extraction from T. `AnswerStop` answers yes only when all of these hold:

1. `match: first` (with `match: last` a later match replaces the answer: never decided);
2. the pattern matches T (without a match, a later match or a later number can still appear,
   whatever the fallback: never decided);
3. the regular-expression search that found that first match never looked past the end of T:
   no attempt at a start position up to the match's start, in the engine's backtracking order up
   to and including the successful path, needed the character after T's last one (a greedy
   `[\\d,.]+` reading to the end of `#### 12`, an `a.*b` alternative still open, `$` or `\\b` at
   the end). The outcome of a backtracking search depends on T + s only through the characters
   it read, so a search that read none of s finds the same match, with the same groups, in
   T + s: the same answer, whatever the fallback. This is Java's `Matcher.hitEnd`, which
   Python's `re` does not expose; `_Search` replays the search on the pattern's parse tree
   (`re._parser`), tracking reads past the end, and its match must equal `re`'s (start, end and
   every group) or the text counts as undecided.

So `#### 12` is undecided (`#### 123`, `#### 12.5` may follow), `#### 12\\n` and `#### 12 ` are
decided; `Answer: ZAKO` is undecided under `Answer:\\s*([A-Za-z]+)`, `Answer: ZAKO.` decided.

Patterns whose parse tree holds what `_Search` does not replay (lookarounds, backreferences,
conditionals, atomic groups, possessive repeats, scoped inline flags, a repeat whose body can
match the empty string) are never decided: such a task generates as before. A search that needs
more than `STEP_LIMIT` steps counts as undecided too, and a sequence whose checks exceed
`SEQUENCE_STEP_LIMIT` steps in all is no longer checked (a pathological pattern costs a bounded
amount of time, never a different score).

**What T is.** The engine passes the *stable prefix* of the decoded output (`stable_prefix`):
the text every longer output of that sequence starts with, after the engine's own cut at the
first stop string. Decoding tokens is prefix-stable except at the end: an incomplete UTF-8
character decodes as U+FFFD (dropped here), `clean_up_tokenization_spaces` may remove a space up
to four characters back (four characters dropped when the tokenizer cleans up), and a stop string
that begins in the last `len(stop) - 1` characters would cut the output before them (dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

try:                                   # Python >= 3.11
    from re import _compiler as _sre_compile
    from re import _constants as _C
    from re import _parser as _sre_parse
except ImportError:                    # pragma: no cover - Python 3.10
    import sre_compile as _sre_compile  # type: ignore[no-redef]
    import sre_constants as _C  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

import re

STEP_LIMIT = 50_000            # steps of one search replay
SEQUENCE_STEP_LIMIT = 400_000  # steps of all the replays of one sequence
CLEANUP_MARGIN = 4             # characters clean_up_tokenization_spaces may still change

_SINGLE = {_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN}
_AT_START = {_C.AT_BEGINNING, _C.AT_BEGINNING_LINE, _C.AT_BEGINNING_STRING}
_REPEATS = {_C.MAX_REPEAT, _C.MIN_REPEAT}


class Unsupported(Exception):
    """The pattern holds a construct `_Search` does not replay."""


class _Budget(Exception):
    """A replay ran past its step limit."""


class _Search:
    """`re`'s leftmost-first backtracking search, replayed on the parse tree with a record of
    whether it read past the end of the text.

    Single characters and zero-width assertions are tested with `re` itself (each node compiled
    alone with the pattern's flags and matched at the position, on the whole text), so character
    classes, case folding and `\\b` mean exactly what they mean to `re`; only the order of the
    backtracking (sequences, alternatives in order, greedy repeats longest first, lazy ones
    shortest first, groups keeping the capture of the path that succeeds) is replayed here."""

    def __init__(self, pattern: re.Pattern):
        self.pattern = pattern
        tree = _sre_parse.parse(pattern.pattern, pattern.flags)
        self.state = tree.state
        self.groups = tree.state.groups - 1
        self.nodes: dict[int, re.Pattern] = {}
        self.tree = self._prepare(list(tree))

    # -- preparation: check every node once, compile the single-character ones -------------
    def _prepare(self, items: list) -> list:
        out = []
        for op, av in items:
            if op in _SINGLE or op is _C.AT:
                key = len(self.nodes)
                sub = _sre_parse.SubPattern(self.state, [(op, av)])
                self.nodes[key] = _sre_compile.compile(sub, self.pattern.flags)
                out.append((op, (key, av)))
            elif op is _C.BRANCH:
                out.append((op, [self._prepare(list(alt)) for alt in av[1]]))
            elif op is _C.SUBPATTERN:
                group, add_flags, del_flags, body = av
                if add_flags or del_flags:
                    raise Unsupported("a group with its own flags")
                out.append((op, (group, self._prepare(list(body)))))
            elif op in _REPEATS:
                lo, hi, body = av
                if hi > 1 and body.getwidth()[0] == 0:
                    raise Unsupported("a repeat whose body can match the empty string")
                body_items = self._prepare(list(body))
                single = len(body_items) == 1 and body_items[0][0] in _SINGLE
                out.append((op, (lo, hi, body_items, single)))
            else:
                raise Unsupported(f"{op}")
        return out

    # -- the replay ------------------------------------------------------------------------
    def search(self, text: str, first_start: int, last_start: int) -> tuple[Any, bool, int, int]:
        """The first match starting in [first_start, last_start]: (match or None, whether the
        search read past the end, steps, the start position below which every attempt failed
        without reading past the end). A match is (start, end, {group: (start, end)}); the
        replay stops at the first match or at the first attempt that read past the end."""
        run = _Run(self, text)
        for start in range(first_start, last_start + 1):
            found = run.seq(self.tree, 0, start, {}, lambda pos, caps: (pos, caps))
            if run.touched:
                return None, True, run.steps, start
            if found is not None:
                return (start, found[0], found[1]), False, run.steps, start
        return None, False, run.steps, last_start + 1


class _Run:
    def __init__(self, search: _Search, text: str):
        self.s, self.text, self.n = search, text, len(text)
        self.touched = False
        self.steps = 0

    def _char(self, key: int, pos: int) -> bool:
        if pos >= self.n:
            self.touched = True
            return False
        return self.s.nodes[key].match(self.text, pos) is not None

    def seq(self, items: list, i: int, pos: int, caps: dict, k: Callable) -> Any:
        """Match items[i:] at pos, then the continuation k(pos, caps); the first success in
        backtracking order, or None."""
        if self.touched:
            return None
        if i == len(items):
            return k(pos, caps)
        self.steps += 1
        if self.steps > STEP_LIMIT:
            raise _Budget
        op, av = items[i]

        def nxt(p: int, c: dict) -> Any:
            return self.seq(items, i + 1, p, c, k)

        if op in _SINGLE:
            return nxt(pos + 1, caps) if self._char(av[0], pos) else None
        if op is _C.AT:
            if av[1] not in _AT_START and pos >= self.n - 1:
                self.touched = True          # `$` before a final newline, `\b` at the end...
                return None
            return nxt(pos, caps) if self.s.nodes[av[0]].match(self.text, pos) else None
        if op is _C.BRANCH:
            for alt in av:
                found = self.seq(alt, 0, pos, caps, nxt)
                if found is not None or self.touched:
                    return found
            return None
        if op is _C.SUBPATTERN:
            group, body = av
            if group is None:
                return self.seq(body, 0, pos, caps, nxt)

            def close(p: int, c: dict) -> Any:
                return nxt(p, {**c, group: (pos, p)})
            return self.seq(body, 0, pos, caps, close)
        lo, hi, body, single = av
        greedy = op is _C.MAX_REPEAT
        if single:
            return self._repeat_one(body[0][1][0], lo, hi, greedy, pos, caps, nxt)
        return self._repeat(body, lo, hi, greedy, 0, pos, caps, nxt)

    def _repeat_one(self, key, lo, hi, greedy, pos, caps, nxt) -> Any:
        if greedy:
            count = 0
            while count < hi and self._char(key, pos + count):
                count += 1
            if self.touched or count < lo:
                return None
            for c in range(count, lo - 1, -1):
                found = nxt(pos + c, caps)
                if found is not None or self.touched:
                    return found
            return None
        for c in range(lo):
            if not self._char(key, pos + c):
                return None
        count = lo
        while True:
            found = nxt(pos + count, caps)
            if found is not None or self.touched:
                return found
            if count >= hi or not self._char(key, pos + count):
                return None
            count += 1

    def _repeat(self, body, lo, hi, greedy, count, pos, caps, nxt) -> Any:
        def again(p: int, c: dict) -> Any:
            return self._repeat(body, lo, hi, greedy, count + 1, p, c, nxt)

        if greedy:
            if count < hi:
                found = self.seq(body, 0, pos, caps, again)
                if found is not None or self.touched:
                    return found
            return nxt(pos, caps) if count >= lo else None
        if count >= lo:
            found = nxt(pos, caps)
            if found is not None or self.touched:
                return found
        return self.seq(body, 0, pos, caps, again) if count < hi else None


def _same(mine: tuple, theirs: re.Match, groups: int) -> bool:
    start, end, caps = mine
    if (start, end) != theirs.span():
        return False
    return all(caps.get(g, (-1, -1)) == theirs.span(g) for g in range(1, groups + 1))


class AnswerStop:
    """When an exact-match answer is decided (module doc). `tracker()` gives one sequence's
    checker: `check(text) -> bool`, called with that sequence's growing stable prefix."""

    def __init__(self, pattern: re.Pattern, *, match: str = "first", unicode_minus: bool = False):
        self.pattern = pattern
        self.match = match
        self.unicode_minus = unicode_minus
        self.reason = ""
        self.search: _Search | None = None
        if match != "first":
            self.reason = "match: last (a later match replaces the answer)"
            return
        try:
            self.search = _Search(pattern)
        except Exception as exc:  # noqa: BLE001 - Unsupported, or any parse trouble: no rule
            self.reason = f"pattern not replayed ({exc})"

    @classmethod
    def for_matcher(cls, matcher: Any) -> AnswerStop:
        """From an `a2c.answer_match.AnswerMatch` (the exact_match grader's reading)."""
        return cls(matcher.pattern, match=matcher.match,
                   unicode_minus="unicode_minus" in matcher.steps)

    @property
    def active(self) -> bool:
        return self.search is not None

    def tracker(self) -> Callable[[str], bool]:
        return _Tracker(self)

    def decided(self, text: str) -> bool:
        """Whether `text` decides the answer (a fresh tracker: no memory of shorter texts)."""
        return self.tracker()(text)


class _Tracker:
    """One sequence's checks. Start positions whose attempt failed without reading past the end
    fail for every longer text too, so a longer text (one that starts with the last) resumes after
    them instead of replaying them again."""

    def __init__(self, rule: AnswerStop):
        self.rule = rule
        self.text = ""
        self.failed_upto = 0      # attempts at start positions below this fail for good
        self.steps = 0
        self.gave_up = not rule.active

    def __call__(self, text: str) -> bool:
        rule = self.rule
        if self.gave_up or not text:
            return False
        if rule.unicode_minus:
            text = text.replace("\u2212", "-")
        m = rule.pattern.search(text)
        if m is None:
            return False
        if not text.startswith(self.text):
            self.failed_upto = 0
        self.text = text
        search = rule.search
        assert search is not None
        try:
            mine, touched, steps, failed_upto = search.search(
                text, min(self.failed_upto, m.start()), m.start())
        except (_Budget, RecursionError):
            mine, touched, steps, failed_upto = None, True, STEP_LIMIT, self.failed_upto
        self.failed_upto = failed_upto
        self.steps += steps
        if self.steps > SEQUENCE_STEP_LIMIT:
            self.gave_up = True
        if touched or mine is None:
            return False
        if not _same(mine, m, search.groups):
            self.gave_up = True       # the replay disagrees with re: never decide this sequence
            return False
        return True


def stable_prefix(text: str, stop: Sequence[str] = (), cleanup: bool = False) -> str | None:
    """The part of a sequence's decoded text that every longer output of it starts with, after
    the cut at the first stop string; None when a stop string already ended it (module doc)."""
    for s in stop:
        if s and s in text:
            return None
    text = text.rstrip("\ufffd")
    margin = max([len(s) - 1 for s in stop if s] + [0]) + (CLEANUP_MARGIN if cleanup else 0)
    return text[:len(text) - margin] if margin else text
