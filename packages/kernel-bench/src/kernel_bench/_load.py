"""How much of the machine other processes used while something was timed.

A timing is only as good as the machine was quiet: rounds measured while
another program ran (a test suite, a build) are slow or spread, and a
decision measured then says nothing about an idle machine. The spread of the
rounds alone cannot tell a loaded machine from a kernel whose own times vary
(a threaded kernel on two cores), and a steady load can slow every round
alike. :class:`OtherLoad` measures the load itself: the CPU time the whole
machine spent busy (Linux's ``/proc/stat``: user, system, interrupts and the
time the hypervisor gave to other machines) less the CPU time of this
process (every thread), over the wall time the measurement lasted.

Where ``/proc/stat`` cannot be read (macOS, Windows, a sandbox), the load is
unknown (None) and nothing is decided from it.
"""

from __future__ import annotations

import dataclasses
import os
import time

__all__ = ["BUSY_LOAD", "OtherLoad", "known", "usable_cpus"]

#: Other processes using more than this share of the machine's CPU time
#: while something was timed make the machine busy (on 2 cores: one core
#: half the time).
BUSY_LOAD = 0.25

#: Where the kernel counts the machine's CPU time (Linux).
PROC_STAT = "/proc/stat"
# The fields of its "cpu" line that are work, not idleness: user, nice,
# system, irq, softirq, steal (iowait and idle are not; guest time is
# counted in user already).
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


def usable_cpus() -> tuple[int, ...] | None:
    """The CPUs this process may run on (its affinity: ``taskset``, a
    container's cpuset), in order; None where the system does not say (off
    Linux). A threaded backend gets these, not all the machine's."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return None


@dataclasses.dataclass(frozen=True)
class _Sample:
    wall_s: float
    mine_s: float
    machine_busy_s: float | None
    cpus: int | None


def _machine() -> tuple[float | None, int | None]:
    # The machine's busy CPU seconds and its CPU count, from /proc/stat; None
    # where it cannot be read or is not what Linux writes.
    try:
        with open(PROC_STAT, encoding="ascii") as f:
            lines = f.read(1 << 16).splitlines()
        total = lines[0].split()
        if total[0] != "cpu" or len(total) < 9:
            return None, None
        ticks = [int(total[1 + i]) for i in _BUSY_FIELDS]
        cpus = sum(1 for line in lines[1:] if line.startswith("cpu"))
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None, None
    if cpus < 1 or hz < 1 or min(ticks) < 0:
        return None, None
    return sum(ticks) / hz, cpus


def known() -> bool:
    """Whether this machine's load can be measured (``/proc/stat`` reads)."""
    return _machine()[0] is not None


def _sample() -> _Sample:
    busy, cpus = _machine()
    return _Sample(time.monotonic(), time.process_time(), busy, cpus)


class OtherLoad:
    """The load of other processes from the moment it is made.

    Example:
        >>> meter = OtherLoad()
        >>> share = meter.share()
        >>> share is None or 0.0 <= share <= 1.0
        True
    """

    def __init__(self) -> None:
        self._start = _sample()

    def seconds(self) -> float | None:
        """CPU seconds that other processes (and other virtual machines on
        the same host) used since the meter was made; None where unknown."""
        return _others_s(self._start, _sample())

    def share(self) -> float | None:
        """The share of the machine's CPU time (0 to 1) that other processes
        used since the meter was made; None where unknown."""
        now = _sample()
        others = _others_s(self._start, now)
        wall = now.wall_s - self._start.wall_s
        if others is None or now.cpus is None or wall <= 0:
            return None
        return min(1.0, others / (wall * now.cpus))


def _others_s(start: _Sample, now: _Sample) -> float | None:
    # The machine's busy time less this process's, between two samples; the
    # kernel counts in ticks, so a few ticks either way are rounding.
    if now.machine_busy_s is None or start.machine_busy_s is None:
        return None
    machine = now.machine_busy_s - start.machine_busy_s
    return max(0.0, machine - (now.mine_s - start.mine_s))
