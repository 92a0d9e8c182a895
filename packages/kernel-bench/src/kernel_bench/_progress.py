"""A text progress bar for the command line, on standard error.

``benchmark_kernel(..., progress=callback)`` calls ``callback(done, total,
description)`` before each backend runs on each case (``done`` steps finished
out of ``total``) and once more at the end with ``done == total``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """A progress-bar callback for ``benchmark_kernel``.

    On a terminal it redraws one line in place; on anything else it writes one
    line per step, so logs stay readable. ``prefix`` names the current kernel
    when several are run in turn.

    Args:
        stream: where to write; standard error by default.
        width: the bar's width in characters.
    """

    def __init__(self, stream: TextIO | None = None, *, width: int = 24) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self.prefix = ""
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._start = time.perf_counter()
        self._last = 0

    def __call__(self, done: int, total: int, description: str) -> None:
        filled = self.width * done // total if total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self._start
        line = f"{self.prefix}[{bar}] {done}/{total} {elapsed:5.1f}s {description}".rstrip()
        if self._tty:
            self.stream.write("\r" + line.ljust(self._last))
            self._last = len(line)
            if done == total:
                self.stream.write("\n")
                self._last = 0
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
