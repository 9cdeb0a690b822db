"""Rich tables for listings whose cells are identifiers: nothing is ever cut with an ellipsis.

Rich shortens a cell that does not fit ("alfworld-s…") by default; an id, a driver name or an
install command cut short cannot be copied back into a command. Id columns keep their widest
value on one line (`min_width`, no wrap) and every other column folds onto more lines instead.
"""

from __future__ import annotations

from typing import Any


def listing(title: str, columns: list[str], rows: list[list[str]], ids: tuple[str, ...] = ("id",)
            ) -> Any:
    """A table of `rows` (lists of strings in `columns` order): columns named in `ids` never
    wrap and are as wide as their widest cell; the others fold rather than being cut."""
    from rich.table import Table

    table = Table(title=title)
    for i, column in enumerate(columns):
        if column in ids:
            widest = max([len(column), *(len(r[i]) for r in rows)])
            table.add_column(column, no_wrap=True, min_width=widest, overflow="fold")
        else:
            table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table
