"""Tables for people: drawn with rich on a terminal, plain text anywhere else.

Pipes, files and logs get exactly ``Table.plain``'s text. rich is imported only
when something is drawn on a terminal: it takes a fifth of a second to import,
which no script that writes to a file should pay.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from ._table import BEST, BEST_MEANING, FAILED, NO_RECORDS, Column, Report, Table

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table as RichTable

__all__ = ["is_terminal", "print_report", "print_table", "report_renderables", "rich_table"]

_STYLES = {BEST: "bold green", FAILED: "red"}
# Spaces between two columns, as in plain text.
_GAP = 2
# The narrowest a text column is made to fit a terminal.
_MIN_TEXT = 12


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (its ``isatty()``; False where it has none)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


def print_report(report: Report, file: TextIO | None = None) -> None:
    """Print ``report`` to ``file`` (standard output by default): drawn with rich,
    fitted to the width, on a terminal; its plain text anywhere else."""
    file = sys.stdout if file is None else file
    if not is_terminal(file):
        print(report.plain(), file=file)
        return
    from rich.console import Console

    console = Console(file=file)
    for renderable in report_renderables(report, width=console.width):
        # Not cropped: a table that cannot fit is wrapped by the terminal.
        console.print(renderable, crop=False)


def print_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: Sequence[bool],
    *,
    file: TextIO | None = None,
) -> None:
    """Print one table of strings as ``print_report`` does: on a terminal with rich,
    elsewhere the text ``render(header, rows, numeric)`` returns."""
    print_report(Report((Table.from_strings(header, rows, numeric),)), file)


def rich_table(table: Table, *, width: int) -> RichTable:
    """``table`` as a rich Table: the same columns and cells, the fastest backend
    of each case in bold green (without ``*``), failures in red; at most ``width``
    characters wide where it can be without cutting a number (wider otherwise,
    to be printed with ``crop=False``)."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    out = RichTable(
        title=table.title,
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        header_style="bold",
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    texts = table.texts(terminal=True)
    widths = _fit(table, texts, width)
    needed = sum(widths) + _GAP * (len(widths) - 1)
    if needed > width:
        out.width = needed
    for column, column_width in zip(table.columns, widths, strict=True):
        out.add_column(
            column.name,
            justify="right" if column.numeric else "left",
            width=column_width,
            overflow="fold",
        )
    for cells, row in zip(table.rows, texts, strict=True):
        out.add_row(
            *(Text(t, style=_STYLES.get(c.mark, "")) for c, t in zip(cells, row, strict=True))
        )
    return out


def report_renderables(report: Report, *, width: int) -> list[RenderableType]:
    """What ``print_report`` prints on a terminal ``width`` characters wide, in order."""
    from rich.text import Text

    if not report.tables:
        return [Text(NO_RECORDS)]
    out: list[RenderableType] = []
    for i, table in enumerate(report.tables):
        if i:
            out.append(Text())
        out.append(rich_table(table, width=width))
        out += [Text(note, style=_STYLES[FAILED]) for note in table.notes]
    if report.marks_best:
        out += [Text(), Text(BEST_MEANING, style=_STYLES[BEST])]
    return out


def _fit(table: Table, texts: list[list[str]], width: int) -> list[int]:
    # Where a table is too wide, rich narrows every column alike and cuts the
    # numbers. Here the failures' messages wrap first, then the headers of
    # numbers (at spaces), then other text, the widest column first, down to
    # what each column needs: its longest header word and its widest number,
    # or a few characters of text. Numbers are never cut: a table still too
    # wide is drawn wider than the terminal, which wraps its lines as it would
    # plain text.
    room = width - _GAP * (len(table.columns) - 1)
    widths, least = [], []
    for j, column in enumerate(table.columns):
        widest = max((len(row[j]) for row in texts), default=0)
        word = max(map(len, column.name.split()), default=0)
        widths.append(max(len(column.name), widest))
        least.append(max(word, widest if column.numeric else min(widest, _MIN_TEXT)))
    while sum(widths) > room:
        shrinkable = [j for j, w in enumerate(widths) if w > least[j]]
        if not shrinkable:
            break
        j = max(shrinkable, key=lambda j: (*_priority(table.columns[j]), widths[j]))
        widths[j] -= 1
    return widths


def _priority(column: Column) -> tuple[bool, bool]:
    return column.limit is not None, column.numeric
