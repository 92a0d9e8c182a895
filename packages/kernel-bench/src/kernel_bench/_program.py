"""The two measurements of the suite: the dispatch times of every backend of a
case, and the time per call inside a compiled program, measured for several
cases together in passes."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from . import _timing
from ._quiet import Quiet
from ._record import BenchmarkRecord
from ._timing import Spread, Timing, calls_per_run, chained, interleaved

__all__ = [
    "PASSES",
    "REFERENCE_OP",
    "REFERENCE_SIZE",
    "InProgram",
    "deferred_in_program",
    "dispatch_times",
    "program_times",
    "waiting_list",
    "with_measured",
]

#: The name under which :func:`program_times` times its reference operation.
REFERENCE_OP = "reference op"
#: Elements of the reference op's input: enough that a call costs tens of
#: nanoseconds, not the loop's bookkeeping alone.
REFERENCE_SIZE = 1024
#: Into how many passes :func:`program_times` splits each case's rounds: one
#: pass runs a few rounds of every case, then the next pass, as asv runs its
#: rounds over the whole suite. A machine slowed for a second (another
#: virtual machine on the same host, say) then slows a few rounds of many
#: cases instead of all the rounds of one.
PASSES = 5


def dispatch_times(
    runs: dict[str, Any], args: tuple[Any, ...], n_batch: int, n_runs: int
) -> tuple[dict[str, Timing], dict[str, BaseException]]:
    """The dispatch times of each of ``runs`` (programs made by
    ``_timing.chained``, warmed up): ``n_runs`` rounds, each calling every
    program once with ``n_batch`` chained calls, the order shuffled every
    round (as ``_timing.interleaved``), so that no backend is timed only
    after the others or only after one of them. Each timed run follows one
    untimed call of its own program, made once no other thread of the
    process is running (:class:`_quiet.Quiet`): it is timed as a call in a
    loop of calls is, right after the one before it (threads that call woke
    still awake, what it left running its own), and never after what another
    backend left running. Returns the timing per backend (ms per call; its
    output the last run's) and the exception of each backend whose run raised
    (left out of the later rounds)."""
    count = jax.numpy.asarray(n_batch, dtype=jax.numpy.int32)
    one = jax.numpy.asarray(1, dtype=jax.numpy.int32)
    order = list(runs)
    times: dict[str, list[float]] = {b: [] for b in order}
    outputs: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}
    shuffle = random.Random(0).shuffle
    with Quiet() as quiet:
        for _ in range(n_runs):
            shuffle(order)
            for backend in order:
                if backend in errors:
                    continue
                quiet.wait()
                try:
                    jax.block_until_ready(runs[backend](one, *args))
                    start = _timing._now()
                    outputs[backend] = jax.block_until_ready(runs[backend](count, *args))
                    times[backend].append((_timing._now() - start) * 1e3 / n_batch)
                except Exception as exc:
                    errors[backend] = exc
    timings = {b: Timing(tuple(t), outputs[b]) for b, t in times.items() if b not in errors}
    return timings, errors


@functools.cache
def _reference_run() -> Callable[..., Any]:
    # One program for the whole process: the reference op is compiled once.
    return chained(lambda x: x * 0.5 + 1.0)


def _calibrated(
    runs: Mapping[str, Callable[..., Any]],
    data: Sequence[Any],
    seconds_per_run: float,
    same_chain: Mapping[str, str],
) -> tuple[dict[str, Callable[..., Any]], dict[str, int], dict[str, BaseException]]:
    # The runs and the reference op (an elementwise op on REFERENCE_SIZE
    # floats, whose spread is the machine's noise while the others were
    # measured), each bound to its data and with the calls its chain holds
    # (``_timing.calls_per_run``; a run named in ``same_chain`` takes the
    # count of the one it names instead); the exception of each that could
    # not be timed.
    chains = {name: (run, tuple(data)) for name, run in runs.items()}
    reference = jnp.linspace(0.0, 1.0, REFERENCE_SIZE, dtype=jnp.float32)
    chains[REFERENCE_OP] = (_reference_run(), (reference,))
    timed: dict[str, Callable[..., Any]] = {}
    counts: dict[str, int] = {}
    failed: dict[str, BaseException] = {}
    for name, (run, args) in chains.items():
        if same_chain.get(name) in chains:
            continue
        try:
            counts[name] = calls_per_run(run, args, seconds_per_run)
        except Exception as exc:
            failed[name] = exc
            continue
        timed[name] = lambda count, *_, run=run, args=args: run(count, *args)
    for name, other in same_chain.items():
        if name in chains and other in counts:
            run, args = chains[name]
            counts[name] = counts[other]
            timed[name] = lambda count, *_, run=run, args=args: run(count, *args)
    return timed, counts, failed


@dataclasses.dataclass(frozen=True)
class InProgram:
    """One case waiting for its in-program rounds: its backends' programs
    (made by ``_timing.chained``), its data and its records (those of
    backends that ran get the times)."""

    runs: Mapping[str, Any]
    args: tuple[Any, ...]
    records: tuple[BenchmarkRecord, ...]


def _pass_sizes(rounds: int, passes: int) -> list[int]:
    # ``rounds`` split as evenly as possible over at most ``passes`` passes.
    passes = max(1, min(passes, rounds))
    return [rounds // passes + (i < rounds % passes) for i in range(passes)]


def program_times(
    cases: Sequence[InProgram],
    *,
    n_runs: int,
    seconds: float,
    passes: int = PASSES,
    progress: Callable[[int, int, str], None] | None = None,
    trace: list[tuple[float, int, str, float]] | None = None,
) -> list[list[BenchmarkRecord]]:
    """The records of each of ``cases`` with their in-program times: each
    case's backends and a small reference operation (:data:`REFERENCE_OP`)
    calibrated to chains lasting about ``seconds``, then
    ``n_runs`` timed rounds per case split over ``passes`` passes; a pass
    runs every case once, in an order shuffled every pass, each case a
    warm-up round (thrown away: the last case left its data in the caches)
    and then its share of the rounds interleaved (``_timing.interleaved``).
    ``"auto"`` chains as many calls as the backend it picked. ``progress`` is
    called as ``progress(done, total, description)`` before each case's rounds
    and once at the end. Where ``trace`` is given, every timed run is
    appended to it (in no particular order) as ``(start, case, name,
    microseconds per call)``, ``case`` the index in ``cases`` (what
    ``_stretches.slow_stretches`` reads)."""
    plans = []
    for case in cases:
        timed = {
            r.backend: case.runs[r.backend]
            for r in case.records
            if r.mean_ms is not None and r.backend in case.runs
        }
        # "auto" runs the program of the backend it picked: it chains as many
        # calls as that backend's runs, so that the two columns time one
        # program the same way (a chain's length changes the time per call).
        picked = {
            r.backend: r.autotune["backend"]
            for r in case.records
            if r.autotune is not None and r.backend in timed and r.autotune.get("backend") in timed
        }
        calibrated = _calibrated(timed, case.args, seconds, picked) if timed else ({}, {}, {})
        plans.append(calibrated)
    times: list[dict[str, list[float]]] = [{name: [] for name in p[0]} for p in plans]
    order = [i for i, p in enumerate(plans) if p[0]]
    shuffle = random.Random(1).shuffle
    sizes = _pass_sizes(n_runs, passes)
    total, step = len(sizes) * len(order), 0
    for number, rounds in enumerate(sizes):
        shuffle(order)
        for i in order:
            if progress is not None:
                progress(step, total, f"in program, pass {number + 1} of {len(sizes)}")
            step += 1
            timed, counts, _failed = plans[i]
            # Another shuffle each pass: over the passes every run follows
            # several others, whatever the few rounds of one pass give.
            starts: dict[str, list[float]] | None = {} if trace is not None else None
            found_in_pass = interleaved(
                timed, counts, (), rounds=rounds, seed=number, starts=starts
            )
            for name, found in found_in_pass.items():
                times[i][name] += found
                if starts is not None and trace is not None:
                    trace += [(t, i, name, us) for t, us in zip(starts[name], found, strict=True)]
    if progress is not None:
        progress(total, total, "done")
    return [
        _with_times(case.records, found, plan[1])
        for case, found, plan in zip(cases, times, plans, strict=True)
    ]


def _with_times(
    records: Sequence[BenchmarkRecord], times: dict[str, list[float]], counts: dict[str, int]
) -> list[BenchmarkRecord]:
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


# Where benchmark_kernel leaves its cases' in-program rounds (deferred_in_program).
_waiting: contextvars.ContextVar[list[InProgram] | None] = contextvars.ContextVar(
    "kernel_bench_waiting", default=None
)


@contextlib.contextmanager
def deferred_in_program() -> Iterator[list[InProgram]]:
    """Within it, ``benchmark_kernel`` leaves each case's in-program rounds in
    the list it yields instead of running them (its records lack the
    in-program times): the suite then runs the rounds of all its kernels'
    cases together, in passes (``_program.program_times``)."""
    waiting: list[InProgram] = []
    token = _waiting.set(waiting)
    try:
        yield waiting
    finally:
        _waiting.reset(token)


def with_measured(
    records: Sequence[BenchmarkRecord],
    cases: Sequence[InProgram],
    measured: Sequence[Sequence[BenchmarkRecord]],
) -> list[BenchmarkRecord]:
    """``records`` with those of ``cases`` replaced by ``measured`` (what
    ``program_times`` returned for them), in their places."""
    new = {
        id(old): found
        for case, records_found in zip(cases, measured, strict=True)
        for old, found in zip(case.records, records_found, strict=True)
    }
    return [new.get(id(r), r) for r in records]


def waiting_list() -> list[InProgram] | None:
    """The list of the innermost ``deferred_in_program``, None outside one."""
    return _waiting.get()
