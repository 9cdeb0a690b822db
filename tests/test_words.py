"""One meaning per name (docs/architecture.md, "Words"): the user-facing docs never use the
phrases retired when `backend` stopped meaning three things and the grader's service got one name.
A phrase may wrap across a line break, so each doc is read with its whitespace folded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# retired phrase -> the word that says it now
RETIRED = {
    "inference backend": "inference engine (`grader.inference.engine`)",
    "grading service": "grader service",
    "search backend": "search provider (`options.provider`)",
}


def _hits(text: str, phrase: str) -> list[int]:
    """Line numbers where `phrase` starts, matched case-insensitively across line breaks."""
    words = r"\s+".join(map(re.escape, phrase.split()))
    return [text.count("\n", 0, m.start()) + 1
            for m in re.finditer(words, text, flags=re.IGNORECASE)]


@pytest.mark.parametrize("phrase", sorted(RETIRED))
def test_docs_use_one_word_per_meaning(phrase):
    found = [f"{doc.relative_to(ROOT)}:{line}" for doc in DOCS
             for line in _hits(doc.read_text(encoding="utf-8"), phrase)]
    assert not found, f"{phrase!r} is retired, write {RETIRED[phrase]}: {', '.join(found)}"


def test_the_check_sees_a_phrase_across_a_line_break():
    assert _hits("the grading\n  Service runs", "grading service") == [1]
    assert _hits("the grader service", "grading service") == []
