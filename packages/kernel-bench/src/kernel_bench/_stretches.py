"""Whether the reference op's slow runs were the whole machine's.

The suite times a small reference operation in every case's rounds; its
spread is the machine's noise while the backends were timed. A slow run of it
has one of two causes: the machine as a whole ran slower for a while (on a
virtual machine, another tenant of its host loading the cores or the caches
it shares), or something of the reference op's own. The two are told apart
by the runs timed close to it: in the first case the backends timed within
:data:`NEAR_SECONDS` were slow with it, each against its own median; in the
second they were not. :func:`slow_stretches` measures that from every timed
run of the suite's in-program rounds, and :func:`describe` says it on the
noise line (docs/performance.md, *Another host*).
"""

from __future__ import annotations

import bisect
import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["NEAR_SECONDS", "SLOW", "TOGETHER", "SlowStretches", "describe", "slow_stretches"]

#: A reference run at least this many times the median of its case is slow.
SLOW = 1.1
#: How close in time a backend's run must start to a reference run to be its neighbour.
NEAR_SECONDS = 0.2
#: The neighbours of the slow reference runs must be slower than those of the
#: others by this much (their medians' ratios apart) for the slowdown to be
#: called the whole machine's.
TOGETHER = 0.05


@dataclasses.dataclass(frozen=True)
class SlowStretches:
    """The reference op's slow runs, and how the runs beside them fared.

    Attributes:
        reference_runs: the reference op's timed runs, all cases together.
        slow_runs: those at least :data:`SLOW` times the median of their case.
        beside_slow: the median, over the slow reference runs that had
            neighbours, of their neighbours' median time over each
            neighbour's own median (1.0: as usual); None without any.
        beside_others: the same for the other reference runs.
    """

    reference_runs: int
    slow_runs: int
    beside_slow: float | None
    beside_others: float | None

    @property
    def together(self) -> bool:
        """Whether the backends were slow with the reference op (by :data:`TOGETHER`)."""
        if self.beside_slow is None or self.beside_others is None:
            return False
        return self.beside_slow - self.beside_others >= TOGETHER


def slow_stretches(
    runs: Sequence[tuple[float, Any, str, float]], reference: str
) -> SlowStretches | None:
    """What the timed ``runs`` show, each ``(start, case, name, time)``
    (``start`` in seconds on one clock, ``time`` in any unit per call), the
    reference op's named ``reference``; None without reference runs."""
    series: dict[tuple[Any, str], list[float]] = {}
    for _start, case, name, time in runs:
        series.setdefault((case, name), []).append(time)
    medians = {key: statistics.median(times) for key, times in series.items()}
    ordered = sorted(
        (start, name == reference, time / medians[case, name])
        for start, case, name, time in runs
        if medians[case, name] > 0
    )
    # The other runs in order of their starts, to find a window by bisection.
    starts = [start for start, is_reference, _ in ordered if not is_reference]
    ratios = [ratio for _, is_reference, ratio in ordered if not is_reference]
    count = slow = 0
    beside_slow: list[float] = []
    beside_others: list[float] = []
    for start, is_reference, ratio in ordered:
        if not is_reference:
            continue
        count += 1
        is_slow = ratio >= SLOW
        slow += is_slow
        low = bisect.bisect_left(starts, start - NEAR_SECONDS)
        near = ratios[low : bisect.bisect_right(starts, start + NEAR_SECONDS)]
        if near:
            (beside_slow if is_slow else beside_others).append(statistics.median(near))
    if count == 0:
        return None
    return SlowStretches(
        reference_runs=count,
        slow_runs=slow,
        beside_slow=statistics.median(beside_slow) if beside_slow else None,
        beside_others=statistics.median(beside_others) if beside_others else None,
    )


def describe(found: Any) -> str | None:
    """The noise line's words for a :class:`SlowStretches` read back as a
    mapping (records' metadata); None where ``found`` is not one (another
    value, missing or extra fields, fields of other types)."""
    try:
        return _words(SlowStretches(**found))
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def _words(stretches: SlowStretches) -> str:
    share = stretches.slow_runs / stretches.reference_runs
    text = f"the reference op ran at least {SLOW:g}x its case's median in {share:.0%} of its runs"
    if stretches.beside_slow is None or stretches.beside_others is None:
        return text
    text += (
        f"; the backends timed within {NEAR_SECONDS:g} s of those ran at "
        f"{stretches.beside_slow:.2f}x their medians ({stretches.beside_others:.2f}x beside "
        "its other runs)"
    )
    if stretches.together:
        return text + ": the whole machine ran slower at those times"
    return text + ": they did not slow with it"
