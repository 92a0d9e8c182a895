"""Waiting, before a timed run, until the run before it has really ended.

A run's results are ready before the work it started is done. After a
program's outputs are ready XLA's worker thread frees the program's temporary
buffers, and large ones go back to the system (``munmap``): after jax's
``csr_matmat`` at 10^5 that took the worker 5 ms of kernel time, sampled by
``perf``. A threaded kernel's OpenMP workers spin for a few milliseconds
before they sleep. A timed run that starts meanwhile shares the machine with
that work: on a 2-core machine the reference op's 1 ms run was 6-7 % slower
right after jax's ``csr_matmat`` than after nothing, and 1-3.5 % after a wait
(docs/performance.md, *What the run before leaves running*). :class:`Quiet`
waits until no other thread of the process is running, so that no run is
charged for what another left behind.

It reads the scheduler state of the process's threads from
``/proc/self/task`` (Linux). Elsewhere, or where that cannot be read, it does
not wait. A thread that never stops (the user's own, or OpenMP workers told to
spin) would make every wait last its limit: after :data:`GIVE_UP_AFTER` waits
in a row that reach the limit, a :class:`Quiet` stops waiting.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["GIVE_UP_AFTER", "LIMIT_SECONDS", "Quiet"]

#: The longest one wait lasts, in seconds.
LIMIT_SECONDS = 0.02
#: After this many waits in a row that reached the limit, stop waiting.
GIVE_UP_AFTER = 2
# Seconds between two looks at the threads, and how many looks in a row must
# find none of them running.
_POLL_SECONDS = 1e-4
_CALM_LOOKS = 2
_TASKS = "/proc/self/task"


class Quiet:
    """Waits until no other thread of this process is running.

    Open files are kept between looks (one per thread, read again in place),
    so a look costs a few microseconds a thread; :meth:`close` (or the end of
    a ``with`` block) closes them.

    Example:
        >>> with Quiet() as quiet:
        ...     waited = quiet.wait()
        >>> waited >= 0.0
        True
    """

    def __init__(self, enabled: bool = True, limit: float = LIMIT_SECONDS) -> None:
        self.limit = limit
        self._files: dict[str, int] = {}
        self._missed = 0
        #: Whether :meth:`wait` waits: False where asked not to, off Linux,
        #: and once it gave up.
        self.enabled = enabled and os.path.isdir(_TASKS)

    def __enter__(self) -> Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the files kept open."""
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()

    def wait(self) -> float:
        """Wait until no thread of the process but the calling one has been
        running for two looks in a row, at most :attr:`limit` seconds; return
        the seconds waited (0.0 where it does not wait)."""
        if not self.enabled:
            return 0.0
        me = str(threading.get_native_id())
        start = time.perf_counter()
        calm = 0
        while True:
            try:
                busy = self._running(me)
            except OSError:
                self.enabled = False
                self.close()
                return time.perf_counter() - start
            calm = 0 if busy else calm + 1
            waited = time.perf_counter() - start
            if calm >= _CALM_LOOKS:
                self._missed = 0
                return waited
            if waited >= self.limit:
                self._missed += 1
                if self._missed >= GIVE_UP_AFTER:
                    self.enabled = False
                    self.close()
                return waited
            time.sleep(_POLL_SECONDS)

    def _running(self, me: str) -> bool:
        # Whether a thread other than ``me`` (a thread id) is running or
        # waiting for a CPU (state "R" in /proc/self/task/<tid>/stat).
        tids = set(os.listdir(_TASKS))
        tids.discard(me)
        for gone in self._files.keys() - tids:
            os.close(self._files.pop(gone))
        for tid in tids:
            fd = self._files.get(tid)
            if fd is None:
                try:
                    fd = os.open(f"{_TASKS}/{tid}/stat", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                except FileNotFoundError:
                    continue
                self._files[tid] = fd
            try:
                stat = os.pread(fd, 64, 0)
            except ProcessLookupError:
                os.close(self._files.pop(tid))
                continue
            # "<tid> (<name>) <state> ...": the name may hold spaces and ")".
            end = stat.rfind(b")")
            if end >= 0 and stat[end + 2 : end + 3] == b"R":
                return True
        return False
