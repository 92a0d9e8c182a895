"""Tables and progress for people, drawn with rich everywhere.

On a terminal: fitted to its width, the fastest backend in bold green, failures
in red. Anywhere else (a pipe, a file, a log): the same table as plain text,
no colour, as wide as it needs, the fastest backend marked ``*``. rich is
imported only when something is drawn: it takes a fifth of a second to import,
which ``kernel-bench --help`` should not pay.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from ._report import BEST, BEST_MEANING, FAILED, NO_RECORDS, Column, Report, Table

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.progress import Progress, TaskID
    from rich.table import Table as RichTable

__all__ = [
    "ProgressBar",
    "is_terminal",
    "print_report",
    "print_table",
    "render",
    "report_renderables",
    "report_text",
    "rich_table",
]

_STYLES = {BEST: "bold green", FAILED: "red"}
# Spaces between two columns, as in plain text.
_GAP = 2
# The narrowest a text column is made to fit a terminal.
_MIN_TEXT = 12
# Anywhere but a terminal nothing is fitted: a table is as wide as it needs.
_UNFITTED = 100_000


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (its ``isatty()``; False where it has none)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty()) if callable(isatty) else False


def _console(file: TextIO) -> tuple[Console, bool]:
    # A terminal gets colour and its width; anything else plain text.
    from rich.console import Console

    if is_terminal(file):
        return Console(file=file), True
    plain = Console(
        file=file,
        width=_UNFITTED,
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
    )
    return plain, False


def print_report(report: Report, file: TextIO | None = None) -> None:
    """Print ``report`` to ``file`` (standard output by default) with rich: on a
    terminal fitted to its width, in colour; anywhere else as the plain text
    ``report_text`` returns."""
    file = sys.stdout if file is None else file
    if not is_terminal(file):
        print(report_text(report), file=file)
        return
    console, _ = _console(file)
    for renderable in report_renderables(report, width=console.width):
        # Not cropped: a table that cannot fit is wrapped by the terminal.
        console.print(renderable, crop=False)


def report_text(report: Report) -> str:
    """``report`` drawn by rich as plain text: no colour, as wide as it needs,
    the fastest backend marked ``*``; no trailing spaces or last newline."""
    buffer = io.StringIO()
    console, _ = _console(buffer)
    for renderable in report_renderables(report, width=_UNFITTED, terminal=False):
        console.print(renderable, crop=False)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").splitlines())


def render(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """One table of strings as plain text: columns aligned under the header, the
    ``numeric`` ones to the right."""
    return report_text(Report((Table.from_strings(header, rows, numeric),)))


def print_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: Sequence[bool],
    *,
    file: TextIO | None = None,
) -> None:
    """Print one table of strings as ``print_report`` does."""
    print_report(Report((Table.from_strings(header, rows, numeric),)), file)


def rich_table(table: Table, *, width: int, terminal: bool = True) -> RichTable:
    """``table`` as a rich Table: the same columns and cells, the fastest backend
    of each case in bold green (on a terminal; elsewhere marked ``*``), failures
    in red; at most ``width`` characters wide where it can be without cutting a
    number (wider otherwise, to be printed with ``crop=False``)."""
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
    texts = table.texts(terminal=terminal)
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


def report_renderables(
    report: Report, *, width: int, terminal: bool = True
) -> list[RenderableType]:
    """What ``print_report`` prints, in order, ``width`` characters wide, on a
    terminal or (``terminal=False``) anywhere else."""
    from rich.text import Text

    if not report.tables:
        return [Text(NO_RECORDS)]
    out: list[RenderableType] = []
    for i, table in enumerate(report.tables):
        if i:
            out.append(Text())
        out.append(rich_table(table, width=width, terminal=terminal))
        out += [Text(note, style=_STYLES[FAILED]) for note in table.notes]
    if report.marks_best:
        meaning = BEST_MEANING if terminal else f"{BEST} {BEST_MEANING}"
        out += [Text(), Text(meaning, style=_STYLES[BEST])]
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


class ProgressBar:
    """A progress-bar callback for ``benchmark_kernel``, drawn with rich.

    ``benchmark_kernel(..., progress=bar)`` calls ``bar(done, total,
    description)`` before each step (``done`` steps finished out of ``total``)
    and once more at the end with ``done == total``. On a terminal it is a
    live bar (steps done, time elapsed and left, the step), closed when the
    last step is done; anywhere else one line per step, so logs stay
    readable. ``prefix`` names the current kernel when several run in turn.

    Args:
        stream: where to write; standard error by default.
        width: the bar's width in characters.
    """

    def __init__(self, stream: TextIO | None = None, *, width: int = 24) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.prefix = ""
        self._tty = is_terminal(self.stream)
        self._start = time.perf_counter()
        self._display: tuple[Progress, TaskID] | None = None
        self._lines: Console | None = None

    def __call__(self, done: int, total: int, description: str) -> None:
        if self._tty:
            self._draw(done, total, f"{self.prefix}{description}")
            return
        if self._lines is None:
            self._lines, _ = _console(self.stream)
        elapsed = time.perf_counter() - self._start
        line = f"{self.prefix}{done}/{total} {elapsed:.1f}s {description}"
        self._lines.print(line.rstrip(), markup=False)
        self.stream.flush()

    def _draw(self, done: int, total: int, text: str) -> None:
        if self._display is None:
            self._display = _open_display(self.stream, self.width, done, total, text)
        else:
            progress, task = self._display
            progress.update(task, completed=done, total=total, description=text, refresh=True)
        progress, _ = self._display
        if done >= total:
            progress.stop()
            self._display = None


def _open_display(
    stream: TextIO, width: int, done: int, total: int, text: str
) -> tuple[Progress, TaskID]:
    # Nothing outside this display changes: its own console on `stream`, no
    # redirection of sys.stdout or sys.stderr, no refresh thread (it is redrawn
    # at each step, so nothing draws over a traceback), and the cursor is shown
    # again at once, so that a run stopped midway (an exception, Ctrl-C) leaves
    # the terminal as it was.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(file=stream)
    progress = Progress(
        BarColumn(bar_width=width),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("{task.description}", markup=False),
        console=console,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    task = progress.add_task(text, total=total, completed=done)
    progress.start()
    console.show_cursor(True)
    return progress, task
