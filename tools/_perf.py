"""Sampling a process with ``perf`` on its software clock, for the tools that
ask where a call's time goes (bench_instrument.py, bench_numba_cpu.py).

The virtual machines these tools run on have no hardware counters; perf's
``cpu-clock`` event samples on a timer instead, so it works there too. The
samples carry CLOCK_MONOTONIC timestamps, the clock a child reads with
``time.clock_gettime_ns(time.CLOCK_MONOTONIC)`` to say when its timed calls
ran: only the samples inside those windows are counted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence

#: Samples a second.
FREQUENCY = 2000
#: How a command is run under perf: its software clock, timestamps on the
#: clock the child reads; the file goes after ``-o``.
RECORD = ["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F", str(FREQUENCY)]
#: What each kind of code is called, by a part of the name of the file it
#: ran from (the first that matches).
CODE = (
    ("[kernel", "the kernel"),
    ("perf-", "compiled code (JIT)"),
    ("[unknown", "compiled code (JIT)"),
    ("libjax", "XLA's runtime (jaxlib)"),
    ("libc.", "the C library"),
    ("ld-linux", "the C library"),
    ("python", "the Python interpreter"),
)


def can_sample() -> bool:
    """Whether perf is installed and may sample a process here."""
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(
        [*RECORD, "-o", os.devnull, "--", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


def samples(data: str) -> list[tuple[int, int, str]]:
    """Each sample in ``data`` (a ``perf record`` file): thread id, time in
    nanoseconds (CLOCK_MONOTONIC) and the file its instruction was in."""
    out = subprocess.run(
        ["perf", "script", "-i", data, "-F", "tid,time,ip,dso", "--ns"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 3 or "(" not in line:
            continue
        seconds, _, fraction = fields[1].rstrip(":").partition(".")
        when = int(seconds) * 10**9 + int(fraction.ljust(9, "0")[:9])
        found.append((int(fields[0]), when, line[line.rfind("(") + 1 : line.rfind(")")]))
    return found


def code(dso: str) -> str:
    """The kind of code (:data:`CODE`) of a sample from ``dso``, else "other"."""
    name = os.path.basename(dso) or dso
    return next((kind for part, kind in CODE if part in name), "other")


def thread(tid: int, pid: int) -> str:
    """Whose a sample is: the calling thread (the process's first) or another."""
    return "calling thread" if tid == pid else "other threads"


def per_window(
    found: Sequence[tuple[int, int, str]], start: int, end: int, pid: int
) -> Counter[tuple[str, str]]:
    """The samples of ``found`` from ``start`` to ``end`` (nanoseconds), by
    thread (:func:`thread`) and kind of code (:func:`code`)."""
    return Counter(
        (thread(tid, pid), code(dso)) for tid, when, dso in found if start <= when <= end
    )
