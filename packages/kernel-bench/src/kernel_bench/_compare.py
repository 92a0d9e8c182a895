"""The change between two benchmark runs, case by case and backend by backend."""

from __future__ import annotations

from ._console import render
from ._record import BenchmarkRecord, slower_beyond_noise
from ._report import NO_RECORDS, format_ms
from ._result import BenchmarkResult

__all__ = ["compare"]


# The measures a comparison may use, best first: the same one on both sides.
_MEASURES = ("program_median_ms", "median_ms", "mean_ms")
# What ``slower_beyond_noise`` calls each (files of older versions, with a
# mean alone, give no noise to compare with).
_NOISE_MEASURES = {"program_median_ms": "program", "median_ms": "dispatch"}


def _measure(a: BenchmarkRecord | None, b: BenchmarkRecord | None) -> str:
    for name in _MEASURES:
        if all(r is None or r.mean_ms is None or getattr(r, name) is not None for r in (a, b)):
            return name
    return "mean_ms"


def _time(r: BenchmarkRecord | None, measure: str) -> str:
    if r is None:
        return "absent"
    if r.mean_ms is None:
        return "failed"
    return format_ms(getattr(r, measure)) + ("" if r.success else " !")


def compare(old: BenchmarkResult, new: BenchmarkResult) -> str:
    """A table of the time per call of every (case, platform, backend) in ``old``
    and ``new``: the median inside a compiled program where both runs measured
    it, else the median dispatch, else (files of older versions) the mean.

    The change column reads ``"1.25x faster"`` when ``new`` takes 80 % of
    ``old``'s time, with ``", within the noise"`` where neither run's time is
    slower than the other's beyond the noise (medians within 5 %, or
    interquartile ranges overlapping: ``_record.slower_beyond_noise``, the
    rule the suite's verdict uses; files of older versions, with a mean
    alone, give no noise to tell). Records present in one run only are
    listed too; a time marked ``!`` is of a backend whose results did not
    match.

    Example:
        >>> old = BenchmarkResult([BenchmarkRecord("cpu", "numba", "add/n=8", 2.0, 0.0, 2.0, 500.0, True)])
        >>> new = BenchmarkResult([BenchmarkRecord("cpu", "numba", "add/n=8", 1.0, 0.0, 1.0, 1e3, True)])
        >>> print(compare(old, new))
        label    platform  backend  old ms  new ms        change
        ────────────────────────────────────────────────────────
        add/n=8  cpu       numba         2       1  2.00x faster
    """
    for name, value in (("old", old), ("new", new)):
        if not isinstance(value, BenchmarkResult):
            raise TypeError(f"`{name}` must be a BenchmarkResult, got {type(value)!r}")

    def key(r: BenchmarkRecord) -> tuple[str, str, str]:
        return (r.label, r.platform, r.backend)

    before = {key(r): r for r in old.records}
    after = {key(r): r for r in new.records}
    rows = []
    for k in dict.fromkeys([*before, *after]):
        a, b = before.get(k), after.get(k)
        measure = _measure(a, b)
        if a is None or b is None or not getattr(a, measure) or not getattr(b, measure):
            change = "-"
        else:
            ratio = getattr(a, measure) / getattr(b, measure)
            if abs(ratio - 1) < 0.005:
                change = "same"
            else:
                change = f"{ratio:.2f}x faster" if ratio > 1 else f"{1 / ratio:.2f}x slower"
                noise = _NOISE_MEASURES.get(measure)
                apart = noise is None or any(
                    slower_beyond_noise(x, y, noise) for x, y in ((a, b), (b, a))
                )
                change += "" if apart else ", within the noise"
        rows.append([*k, _time(a, measure), _time(b, measure), change])
    if not rows:
        return NO_RECORDS
    header = ["label", "platform", "backend", "old ms", "new ms", "change"]
    return render(header, rows, [False, False, False, True, True, True])
