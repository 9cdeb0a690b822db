"""DeepSearchQA's documents and web search results, typed: a line of the frozen corpus (what the
corpus builder writes, BM25 indexes and the episode shows) and one result of a SearxNG reply
(what the corpus builder fetches and the live `searxng` provider shows).

Why here: the same corpus line was read key by key by the index, the episode's `search` and
`open` and the builder, and the same SearxNG reply by the builder and the live provider, each with
its own defaults. Each is parsed once, where it is read from a file or the network.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Document:
    """One document: `id`, `text`, `title`, `url` (where it was fetched from; "" for a
    hand-made corpus), `snippet` (only the search engine's snippet is kept: the page could not
    be fetched). `score` is a search hit's BM25 score (None outside a ranking; never written)."""

    id: str
    text: str
    title: str = ""
    url: str = ""
    snippet: bool = False
    score: float | None = None

    @classmethod
    def from_line(cls, data: Any, where: str = "corpus") -> Document:
        """A corpus line (parsed JSON); ValueError naming `where` when it is no document."""
        if not isinstance(data, Mapping) or "id" not in data or "text" not in data:
            raise ValueError(f"{where}: a corpus line needs 'id' and 'text'")
        return cls(id=str(data["id"]), text=str(data["text"]), title=str(data.get("title") or ""),
                   url=str(data.get("url") or ""), snippet=bool(data.get("snippet")))

    def to_line(self) -> dict[str, Any]:
        """The corpus line: `snippet` only when true, no score."""
        line = {"id": self.id, "url": self.url, "title": self.title, "text": self.text}
        return {**line, "snippet": True} if self.snippet else line

    def ranked(self, score: float) -> Document:
        return dataclasses.replace(self, score=score)


@dataclass(frozen=True)
class WebResult:
    """One result of a SearxNG JSON reply: the page's `url`, the engine's `title` and its
    snippet (`content`)."""

    url: str
    title: str = ""
    content: str = ""

    @classmethod
    def from_reply(cls, data: Any) -> list[WebResult]:
        """The results of a reply (`{"results": [...]}`), in rank order; one without a URL is
        left out."""
        results = data.get("results") if isinstance(data, Mapping) else None
        return [cls(url=str(r.get("url")), title=str(r.get("title") or ""),
                    content=str(r.get("content") or ""))
                for r in results or [] if isinstance(r, Mapping) and r.get("url")]

    def as_document(self) -> Document:
        """The result as the live provider shows it: its URL is its id, its snippet its text."""
        return Document(id=self.url, text=self.content, title=self.title, url=self.url)
