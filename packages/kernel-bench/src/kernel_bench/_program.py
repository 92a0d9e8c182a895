"""The two measurements of the suite: the dispatch times of every backend of a
case, and the time per call inside a compiled program."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import jax

from . import _timing
from ._record import BenchmarkRecord
from ._timing import REFERENCE_OP, Spread, Timing, in_program

__all__ = ["dispatch_times", "with_program_times"]


def dispatch_times(
    runs: dict[str, Any], args: tuple[Any, ...], n_batch: int, n_runs: int
) -> tuple[dict[str, Timing], dict[str, BaseException]]:
    """The dispatch times of each of ``runs`` (programs made by
    ``_timing.chained``, warmed up): ``n_runs`` rounds, each calling every
    program once with ``n_batch`` chained calls, the order shuffled every
    round (as ``_timing.interleaved``), so that no backend is timed only
    after the others or only after one of them. Returns the timing per
    backend (ms per call; its output the last run's) and the exception of
    each backend whose run raised (left out of the later rounds)."""
    count = jax.numpy.asarray(n_batch, dtype=jax.numpy.int32)
    order = list(runs)
    times: dict[str, list[float]] = {b: [] for b in order}
    outputs: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}
    shuffle = random.Random(0).shuffle
    for _ in range(n_runs):
        shuffle(order)
        for backend in order:
            if backend in errors:
                continue
            try:
                start = _timing._now()
                outputs[backend] = jax.block_until_ready(runs[backend](count, *args))
                times[backend].append((_timing._now() - start) * 1e3 / n_batch)
            except Exception as exc:
                errors[backend] = exc
    timings = {b: Timing(tuple(t), outputs[b]) for b, t in times.items() if b not in errors}
    return timings, errors


def with_program_times(
    runs: dict[str, Any],
    args: tuple[Any, ...],
    records: list[BenchmarkRecord],
    *,
    n_runs: int,
    seconds: float,
) -> list[BenchmarkRecord]:
    """``records`` of one case with their in-program times, where the backend ran
    (``runs``: its program made by ``_timing.chained``)."""
    timed = {
        r.backend: runs[r.backend] for r in records if r.mean_ms is not None and r.backend in runs
    }
    if not timed:
        return records
    # "auto" runs the program of the backend it picked: it chains as many
    # calls as that backend's runs, so that the two columns time one program
    # the same way (a chain calibrated apart on a loaded machine can be longer
    # or shorter, and a chain's length changes the time per call).
    picked = {
        r.backend: r.autotune["backend"]
        for r in records
        if r.autotune is not None and r.backend in timed and r.autotune.get("backend") in timed
    }
    times, counts, _failed = in_program(
        timed, args, rounds=n_runs, seconds_per_run=seconds, same_chain=picked
    )
    reference = times.get(REFERENCE_OP)
    noise = Spread.of(reference).relative_iqr if reference else None
    out = []
    for r in records:
        found = times.get(r.backend)
        if not found:
            out.append(r)
            continue
        spread = Spread.of([t / 1e3 for t in found])
        out.append(
            dataclasses.replace(
                r,
                program_median_ms=spread.median,
                program_min_ms=spread.min,
                program_q25_ms=spread.q25,
                program_q75_ms=spread.q75,
                program_calls=counts[r.backend],
                rounds=spread.n,
                noise=noise,
            )
        )
    return out
