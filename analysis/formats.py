"""The output formats the analysis writes, named once for its writers and the CLI's choices,
and the files one write makes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LEADERBOARD_FORMATS = ("md", "csv", "html")


@dataclass(frozen=True)
class WrittenFiles:
    """The files a report or an analysis (narrative, review) was written to: its JSON, Markdown
    and HTML, and the report's score plot."""

    json: Path
    md: Path
    html: Path
    svg: Path | None = None

    @property
    def listed(self) -> tuple[Path, ...]:
        """The JSON, Markdown and HTML, in the order the CLI prints them."""
        return self.json, self.md, self.html
