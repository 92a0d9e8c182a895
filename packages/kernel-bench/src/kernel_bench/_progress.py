"""A progress bar for the command line, on standard error.

``benchmark_kernel(..., progress=callback)`` calls ``callback(done, total,
description)`` before each backend runs on each case (``done`` steps finished
out of ``total``) and once more at the end with ``done == total``.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

from ._console import is_terminal

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["ProgressBar"]


class ProgressBar:
    """A progress-bar callback for ``benchmark_kernel``.

    On a terminal it is a rich progress display (bar, steps done, time elapsed
    and left, the step), drawn on ``stream`` and closed when the last step is
    done; on anything else it writes one line per step, so logs stay readable.
    ``prefix`` names the current kernel when several are run in turn.

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

    def __call__(self, done: int, total: int, description: str) -> None:
        if self._tty:
            self._draw(done, total, f"{self.prefix}{description}")
            return
        filled = self.width * done // total if total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self._start
        line = f"{self.prefix}[{bar}] {done}/{total} {elapsed:5.1f}s {description}".rstrip()
        self.stream.write(line + "\n")
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
