"""Keeping idle CPUs awake while the suite times, where the system lets us.

Each timed run wakes a thread that slept: XLA's worker, which runs the
compiled program while the calling thread waits, and a threaded kernel's
workers. On a machine whose idle CPUs halt (a virtual machine's CPU then
leaves to its host; a physical one enters a deep C-state), a thread woken on
a CPU that idled runs slowly for a while, more so the longer it idled. That,
not the program, is most of the spread of an idle machine's rounds: on the
project's 2-core virtual machine the reference op's 1 ms runs spread 28 %
over 20 s, and 4.9 % with idle CPUs kept polling (docs/performance.md, *Idle
CPUs that halt*).

:func:`keep_cpus_awake` asks Linux for a CPU wake-up latency of 0 µs, the
kernel's own interface for it (PM QoS, as latency benchmarks such as
cyclictest do): while ``/dev/cpu_dma_latency`` is held open with 0 written,
the idle governor keeps idle CPUs polling instead of halting. The request is
this process's open file: it ends when the file is closed, at the end of the
``with`` block or when the process ends, however it ends, so nothing outlasts
the run. Polling CPUs draw power while the block lasts; that is the cost.
The file is writable by root alone on most systems: elsewhere (and off Linux)
nothing is changed and :attr:`Awake.detail` says why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import struct
import threading
from collections.abc import Iterator

__all__ = ["LATENCY_FILE", "Awake", "held", "keep_cpus_awake"]

#: Linux's CPU latency request (PM QoS): an open file holding an s32 in µs.
LATENCY_FILE = "/dev/cpu_dma_latency"

# How many keep_cpus_awake blocks of this process hold the request now.
_held = 0
_lock = threading.Lock()


def held() -> bool:
    """Whether this process holds the request now (inside a
    :func:`keep_cpus_awake` block that made it). The autotuner files what it
    measures meanwhile apart (``autotune._cache.fingerprint``): a backend
    timed with CPUs that wake at once can rank otherwise than in a process
    whose CPUs halt."""
    return _held > 0


def _count(step: int) -> None:
    global _held
    with _lock:
        _held += step


@dataclasses.dataclass(frozen=True)
class Awake:
    """Whether idle CPUs were kept awake, and how or why not."""

    held: bool
    detail: str

    def describe(self) -> str:
        """One clause for a report."""
        if self.held:
            return f"idle CPUs kept awake ({self.detail})"
        return f"idle CPUs not kept awake ({self.detail})"


@contextlib.contextmanager
def keep_cpus_awake(enabled: bool = True, path: str | None = None) -> Iterator[Awake]:
    """Within the block, hold a CPU wake-up latency request of 0 µs where
    ``path`` (default :data:`LATENCY_FILE`) can be opened for writing; yield
    what was done. ``enabled`` False changes nothing.

    Example:
        >>> with keep_cpus_awake(enabled=False) as awake:
        ...     awake.held
        False
    """
    path = LATENCY_FILE if path is None else path
    if not enabled:
        yield Awake(False, "--no-keep-cpus-awake")
        return
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        yield Awake(False, f"{path}: {exc.strerror or exc}; it takes write access to {path}")
        return
    try:
        try:
            written = os.write(fd, struct.pack("=i", 0))
        except OSError as exc:
            written, reason = 0, exc.strerror or str(exc)
        else:
            reason = f"{written} of 4 bytes written"
        if written != 4:
            yield Awake(False, f"{path}: the request was refused: {reason}")
            return
        _count(1)
        try:
            yield Awake(True, f"a wake-up latency request of 0 us held through {path}")
        finally:
            _count(-1)
    finally:
        os.close(fd)
