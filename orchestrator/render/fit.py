"""Tables that fit the terminal: columns chosen by width, not squeezed.

A terminal table shows each column at least as wide as its header and never wraps a cell onto more
lines: the columns that matter most are kept whole, cells of the columns that may be cut (`Col.cut`)
end in an ellipsis, and what does not fit is left out and named (`Fitted.left_out`), to be seen with
``--wide`` (every column, whatever the width) or ``--json``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.table import Table
from rich.text import Text

ELLIPSIS = "…"
EDGE = 1
"""Characters a table adds besides its columns (rich's boxes: one per column boundary and a space each side)."""
PER_COLUMN = 3
MIN_CUT = 8
"""A cut column is never made narrower than this (nor than its header)."""


@dataclass(frozen=True)
class Col:
    """One column of a fitted table."""

    header: str
    priority: int = 0
    """Lower is kept first when the terminal is narrow (ties: left to right)."""
    cut: bool = False
    """Its cells may be shortened (free text: a reason, a name); others are shown whole or not at all."""
    justify: Literal["left", "right"] = "left"


@dataclass(frozen=True)
class Fitted:
    table: Table
    left_out: tuple[str, ...]
    """Headers of the columns not shown."""
    shortened: tuple[str, ...]
    """Headers of the columns some of whose cells were cut short."""
    width: int
    """The table's width in characters."""

    def note(self) -> str:
        """'not shown here: runner, label (--wide shows every column)', '' when all are shown."""
        if not self.left_out:
            return ""
        return f"not shown at this width: {', '.join(self.left_out)} (--wide shows every column)"


Cell = str | Text
"""A cell: plain text (never read as markup), or styled `Text`."""


def fit(columns: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int | None, *, title: str = "",
        table_box: box.Box | None = box.SIMPLE_HEAD) -> Fitted:
    """The table of ``rows`` (one cell per column) in at most ``width`` characters (None: every
    column at its natural width, as --wide asks)."""
    natural = [max([len(c.header), *(_width(row[i]) for row in rows)]) for i, c in enumerate(columns)]
    floor = [min(n, max(len(c.header), MIN_CUT)) if c.cut else n for c, n in zip(columns, natural, strict=True)]
    order = sorted(range(len(columns)), key=lambda i: (columns[i].priority, i))
    if width is None:
        chosen, widths = list(range(len(columns))), list(natural)
    else:
        chosen = []
        for index in order:
            needed = sum(floor[i] for i in chosen) + floor[index] + PER_COLUMN * (len(chosen) + 1) + EDGE
            if needed <= width or not chosen:
                chosen.append(index)
        chosen.sort()
        widths = list(floor)
        spare = width - (sum(floor[i] for i in chosen) + PER_COLUMN * len(chosen) + EDGE)
        for index in chosen:  # the cut columns get back what is left, left to right
            if columns[index].cut and spare > 0:
                grow = min(spare, natural[index] - floor[index])
                widths[index] += grow
                spare -= grow
    if width is not None and len(title) > width:  # a title is printed as given: wrapped here, between words
        title = "\n".join(textwrap.wrap(title, width, break_long_words=False, break_on_hyphens=False))
    table = Table(title=Text(title) if title else None, title_justify="left", box=table_box)
    for index in chosen:
        column = columns[index]
        table.add_column(column.header, justify=column.justify, no_wrap=True, min_width=widths[index],
                         max_width=widths[index], overflow="ellipsis")
    for row in rows:  # as Text: a cell is never read as markup ('[smoke: ...]')
        table.add_row(*(_cell(row[i], widths[i]) for i in chosen))
    shown = sum(widths[i] for i in chosen) + PER_COLUMN * len(chosen) + EDGE
    shortened = tuple(columns[i].header for i in chosen if widths[i] < natural[i])
    return Fitted(table, tuple(columns[i].header for i in range(len(columns)) if i not in chosen), shortened, shown)


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else len(" ".join(cell.split()))


def _cell(cell: Cell, width: int) -> Text:
    if isinstance(cell, Text):
        shown = cell.copy()
        shown.truncate(width, overflow="ellipsis")
        return shown
    return Text(shorten(cell, width))


def shorten(value: str, width: int) -> str:
    """``value`` on one line of at most ``width`` characters (an ellipsis where it was cut)."""
    line = " ".join(value.split())
    return line if len(line) <= width else line[: max(width - 1, 0)] + ELLIPSIS
