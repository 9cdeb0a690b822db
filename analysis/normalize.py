"""Canonical text, decoders, stop words and stems for the contamination check
(analysis/contamination.py, analysis/item_index.py).

Canonical tokens: literal `\\n`/`\\t`/`\\r` and `\\uXXXX` escapes (text quoted inside JSON or code)
are undone, then Unicode NFKC and casefold; a token is a number or a word (a run of letters and
digits; punctuation and `_` separate tokens). Numbers are canonical: thousands separators go
(`1,234` -> `1234`; `99,99,198` is a list: three numbers), leading zeros and a fraction's trailing zeros go (`007` -> `7`, `7.0` -> `7`,
`2.50` -> `2.5`), and number words become digits (`three` -> `3`, `twenty-five` -> `25`; not
`one`, which is mostly a pronoun).

Decoders: what an agent's text may hide an item in — base64 runs (standard and URL-safe), hex runs
(`57686174...`, `\\x57\\x68`, `57 68 61 74`), %-encoding and HTML entities, reversed text — each
found span decoded when it decodes to text (valid UTF-8, printable), the whole text reversed, and
those again once (URL-encoded base64, ...); every text is also read backwards (`tokens_both`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import operator
import re
import unicodedata
from collections.abc import Iterator
from urllib.parse import unquote_plus

_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|[nrt])")
# A number (1,234,567.5 with proper thousands groups; 99,99,198 is a list: three numbers), a word
# (a run of letters and digits that starts with a letter), or a run that starts with a digit.
_TOKEN = re.compile(r"[^\W\d_][^\W_]*"
                    r"|(?<!\d,)\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![^\W_]|,\d)"
                    r"|\d+(?:\.\d+)?(?![^\W_])|\d[^\W_]*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")

_UNITS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: str(10 * i) for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_WORDS = {w: d for w, d in (_UNITS | _TENS).items() if w != "one"}
_COMPOUND = re.compile(r"\b({})[\s-]+({})\b".format("|".join(_TENS), "|".join(
    w for w, d in _UNITS.items() if 0 < int(d) < 10)))
DIGITS = frozenset("0123456789")
_REVERSE = operator.itemgetter(slice(None, None, -1))
_NEEDS_FIX = re.compile(r"\d*[.,]|0\d")     # a raw number token that is not canonical yet


def _number(token: str) -> str:
    whole, _, frac = token.replace(",", "").partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    return f"{whole}.{frac}" if frac else whole


def _canonical(raw: list[str]) -> list[str]:
    """Raw tokens made canonical: numbers (separators, zeros), number words."""
    distinct = set(raw)
    fix = {tok: _WORDS[tok] for tok in distinct & _WORDS.keys()}
    for tok in filter(_NEEDS_FIX.match, distinct):
        fix[tok] = _number(tok)
    return list(map(fix.get, raw, raw)) if fix else raw


def _raw(text: str) -> list[str]:
    if "\\" in text:
        text = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else " ", text)
    text = unicodedata.normalize("NFKC", text).casefold()
    raw = _TOKEN.findall(text)
    if _TENS.keys() & set(raw):                      # twenty-five -> 25: read again
        raw = _TOKEN.findall(_COMPOUND.sub(
            lambda m: str(int(_TENS[m.group(1)]) + int(_UNITS[m.group(2)])), text))
    return raw


def tokens(text: str) -> list[str]:
    """The canonical tokens of `text` (module docstring)."""
    return _canonical(_raw(text))


def tokens_both(text: str) -> tuple[list[str], list[str]]:
    """The canonical tokens of `text` and of `text` reversed (each token read backwards, the
    last first: what tokenizing the reversed text gives, without reading it again)."""
    raw = _raw(text)
    return _canonical(raw), _canonical(list(map(_REVERSE, reversed(raw))))


STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each else every few for from
further had has have having he her here hers herself him himself his how however i if in into is
it its itself just let me more most much must my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up upon very was we were
what when where which while who whom why will with would you your yours yourself yourselves
many number numbers total each per times time left get gets got make makes made take takes took
give given gives one first second third last next new old much more less least half twice
answer answers question questions reply replies end ends result results follow followed following
write return returns value values find finds use used using example examples true false none null
def class self import from print range len str int float bool list dict tuple set type types typing
lambda yield pass break continue elif while for try except raise assert global nonlocal args kwargs
""".split())


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light stem, so that a paraphrase's `meter`, `downloading` meet `meters`, `downloads`."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 \
                and not (suffix == "s" and word.endswith("ss")):
            word = word[:-len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) >= 5 else word


def canonical(text: str) -> str:
    """The canonical tokens joined by single spaces."""
    return " ".join(tokens(text))


def is_number(token: str) -> bool:
    """A canonical number token: digits, and a fraction."""
    return token.isdigit() or ("." in token and _NUMBER.fullmatch(token) is not None)


# ------------------------------------------------------------------ decoders
MIN_RUN = 16             # shortest base64 / hex run tried (12 / 8 bytes)
DEPTH = 2                # decoders applied to decoded text once more
_B64 = re.compile(r"[A-Za-z0-9+/_-]{" + str(MIN_RUN) + r",}={0,2}")
_HEXRUN = re.compile(r"(?:0x)?((?:[0-9A-Fa-f]{2})+)")
_HEX_SPACED = re.compile(r"[0-9A-Fa-f]{2}(?:[ :,][0-9A-Fa-f]{2}){7,}")
_XESC = re.compile(r"(?:\\x[0-9a-fA-F]{2}){8,}")
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[a-zA-Z]+);")
_B64_TEXT = re.compile(r"[A-Za-z0-9+/=\s]+")


def _as_text(raw: bytes) -> str | None:
    """`raw` as text when it is valid UTF-8 and (nearly) all printable; else None."""
    if len(raw) < 8:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    bad = sum(1 for ch in text if not ch.isprintable() and ch not in "\n\r\t")
    return text if bad <= len(text) // 50 else None


def _b64(run: str) -> str | None:
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    urlsafe = "-" in body or "_" in body
    if urlsafe and ("+" in body or "/" in body):
        return None
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4),
                               altchars=b"-_" if urlsafe else None, validate=True)
    except (binascii.Error, ValueError):
        return None
    return _as_text(raw)


def _hex(digits: str) -> str | None:
    try:
        return _as_text(bytes.fromhex(digits))
    except ValueError:
        return None


def decoded(text: str) -> Iterator[tuple[str, str]]:
    """(decoder, text) per decoder that finds something in `text`: the spans it decodes to text,
    one a line (a file of base64 lines becomes one text of their decoded lines); a span read
    backwards (base64 or hex reversed) is tried too."""
    found: dict[str, list[str]] = {"base64": [], "hex": []}
    if len(text) > 4 * MIN_RUN and _B64_TEXT.fullmatch(text) and any(
            c.isspace() for c in text.strip()):      # wrapped (MIME) base64: one block
        if (out := _b64("".join(text.split()))) is not None:
            found["base64"].append(out)
    for m in _B64.finditer(text):                    # hex runs are base64-alphabet runs too
        run = m.group()
        hexrun = _HEXRUN.fullmatch(run)
        if hexrun is not None:
            digits = hexrun.group(1)
            if (out := _hex(digits)) is not None or (out := _hex(digits[::-1])) is not None:
                found["hex"].append(out)
                continue
        if (out := _b64(run)) is not None or (out := _b64(run[::-1])) is not None:
            found["base64"].append(out)
    for m in _HEX_SPACED.finditer(text):
        if (out := _hex(re.sub(r"[ :,]", "", m.group()))) is not None:
            found["hex"].append(out)
    if "\\x" in text:
        for m in _XESC.finditer(text):
            if (out := _hex(m.group().replace("\\x", ""))) is not None:
                found["hex"].append(out)
    for name, outs in found.items():
        if outs:
            yield name, "\n".join(outs)
    if text.count("%") >= 3 and len(_PCT.findall(text)) >= 3:
        yield "url", unquote_plus(text)
    if text.count("&") >= 3 and len(_ENTITY.findall(text)) >= 3:
        yield "html", html.unescape(text)


def variants(text: str, depth: int = DEPTH, budget: int | None = None
             ) -> Iterator[tuple[str, str]]:
    """("", text), then (how, decoded text) for what `decoded` finds, `depth` levels deep: `how`
    names the decoders applied, outermost first ("base64", "url+base64", ...). All the decoded
    text together is at most `budget` characters (default: twice the text, + 1 MB). Each variant
    is also to be read backwards (`tokens_both`): reversed text is not a variant of its own."""
    yield "", text
    left = [2 * len(text) + 1_000_000 if budget is None else budget]

    def walk(source: str, how: str, level: int) -> Iterator[tuple[str, str]]:
        for name, out in decoded(source):
            left[0] -= len(out)
            if left[0] < 0:
                return
            path = f"{how}+{name}" if how else name
            yield path, out
            if level > 1:
                yield from walk(out, path, level - 1)

    yield from walk(text, "", depth)
