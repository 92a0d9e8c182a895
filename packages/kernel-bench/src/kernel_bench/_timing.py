"""The timing engine: warm up, then time runs that each block until results are ready."""

from __future__ import annotations

import dataclasses
import math
import operator
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ._quiet import Quiet

__all__ = [
    "SECONDS_PER_RUN",
    "SETTLE_SECONDS",
    "WARMUP_ROUNDS",
    "Spread",
    "Timing",
    "benchmark_function",
    "calls_per_run",
    "chained",
    "check_count",
    "interleaved",
]

#: How long one in-program run lasts (the calls chained in it are calibrated
#: to fill it): the suite's in-program column and the autotuner both chain
#: this long, so that they time the same program the same way (a chain's
#: length changes what a call costs: the launch from Python is spread over its
#: calls, and threads that stay awake between calls start none).
SECONDS_PER_RUN = 1e-3
#: Untimed rounds :func:`interleaved` runs before the timed ones.
WARMUP_ROUNDS = 1
# The clock every measurement here reads. Tests replace it with a fake one
# that only the operations being timed move, so that timings are exact.
_clock: Callable[[], float] = time.perf_counter
#: The untimed pause before each timed run of :func:`interleaved`, in
#: seconds: none by default. A pause lets the worker threads the previous run
#: woke (XLA's pool, a parallel kernel's OpenMP team) go back to sleep; on a
#: 2-core virtual machine 2 ms did not make the reference op quieter
#: (tools/bench_instrument.py), and after 10-30 ms it ran 10-25% slower (an
#: idle virtual CPU is slow to wake), so the rounds run back to back.
SETTLE_SECONDS = 0.0
# How the pause is taken (tests replace it).
_sleep: Callable[[float], None] = time.sleep


def _now() -> float:
    return _clock()


def _quantile(ordered: Sequence[float], q: float) -> float:
    # Linear interpolation between the closest ranks (numpy's default method).
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclasses.dataclass(frozen=True)
class Spread:
    """Robust statistics of repeated measurements: the median with the least and
    the interquartile range beside it (no mean: one outlier moves a mean as far
    as it likes, the median not at all).

    Example:
        >>> s = Spread.of([1.0, 2.0, 3.0, 4.0, 100.0])
        >>> s.median, s.min, s.q25, s.q75, s.n
        (3.0, 1.0, 2.0, 4.0, 5)
        >>> round(s.relative_iqr, 3)
        0.667
    """

    median: float
    min: float
    q25: float
    q75: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The statistics of ``values`` (at least one)."""
        if not values:
            raise ValueError("`values` must hold at least one measurement, got none")
        ordered = sorted(values)
        return cls(
            median=_quantile(ordered, 0.5),
            min=ordered[0],
            q25=_quantile(ordered, 0.25),
            q75=_quantile(ordered, 0.75),
            n=len(ordered),
        )

    @property
    def relative_iqr(self) -> float:
        """The interquartile range over the median: how noisy the measurements are."""
        return (self.q75 - self.q25) / self.median if self.median > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class Timing:
    """The measured times of one function, in milliseconds per call.

    Attributes:
        times_ms: one entry per timed run: the run's time divided by the
            number of calls in it.
        output: what the last call returned (ready).
    """

    times_ms: tuple[float, ...]
    output: Any = dataclasses.field(repr=False, compare=False)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.times_ms)

    @property
    def std_ms(self) -> float:
        # Population deviation: defined (0.0) for a single run.
        return statistics.pstdev(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def spread(self) -> Spread:
        """Median, least and quartiles of ``times_ms``."""
        return Spread.of(self.times_ms)


def check_count(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int no less than ``minimum``, else a TypeError/ValueError naming ``name``."""
    if isinstance(value, bool):
        raise TypeError(f"`{name}` must be an int, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"`{name}` must be an int, got {value!r}") from None
    if value < minimum:
        raise ValueError(f"`{name}` must be at least {minimum}, got {value}")
    return value


def _probe(out: Any) -> jax.Array:
    # One element of every output, summed: a cheap use of a call's outputs.
    total = jnp.zeros((), jnp.float32)
    for leaf in jax.tree.leaves(out):
        leaf = jnp.asarray(leaf)
        if leaf.size:
            first = leaf.reshape(-1)[0]
            first = jnp.real(first) if jnp.iscomplexobj(first) else first
            total = total + first.astype(jnp.float32)
    return total


def chained(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``run(count, *data)``: one compiled program calling ``fn(*data)`` ``count``
    times in sequence and returning the last call's outputs; ``count`` is an
    int32 array, a run-time value, so one compilation serves every count."""

    # The loop's trip count is a run-time value, so XLA cannot unroll it and
    # find all but the last call's outputs dead: each call's output is the
    # loop's carry, computed in full. A probe of it feeds an accumulator that
    # passes through an optimization barrier together with the next call's
    # inputs, so XLA sees each call as depending on the one before and cannot
    # hoist a call out of the loop as invariant. The values each call sees are
    # unchanged.
    def body(_: Any, carry: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        data, acc, _out = carry
        data, acc = jax.lax.optimization_barrier((data, acc))
        out = fn(*data)
        return data, acc + _probe(out), out

    @jax.jit
    def run(count: jax.Array, *data: Any) -> tuple[Any, jax.Array]:
        out = fn(*data)
        _, acc, out = jax.lax.fori_loop(1, count, body, (data, _probe(out), out))
        return out, acc

    return lambda count, *data: run(count, *data)[0]


def calls_per_run(
    run: Callable[..., Any], data: Sequence[Any], seconds: float, *, most: int = 10_000_000
) -> int:
    """How many calls a run of ``run`` (made by :func:`chained`) should chain to
    last about ``seconds``, launch included, at least 1 and at most ``most``.

    After a warm-up call, chains of growing length are timed (each at most ten
    times the last) until one lasts a quarter of ``seconds``; each length is
    timed three times and the least taken (a pause of the process only
    lengthens a run). Launching the program from Python and waiting for it
    costs tens to a hundred microseconds whatever the chain: a time per call
    taken from one length counts it among the calls, and a chain timed too
    short, as a guess from one short run would be, is mostly launch, whose
    jitter its rounds would measure instead of the operation. So a chain
    shorter than ``seconds`` is also timed at twice its length: the
    difference is the time of the calls alone, and the calls fill ``seconds``
    less the launch. Where twice the calls do not take at least 1.5 times as
    long (a launch slow for a while after a compilation made a short chain
    look long), the chain grows on."""

    def timed(count: int) -> float:
        start = _now()
        jax.block_until_ready(run(jnp.asarray(count, dtype=jnp.int32), *data))
        return _now() - start

    def least(count: int) -> float:
        return min(timed(count) for _ in range(3))

    timed(1)  # warm
    count, target = 1, seconds / 4
    while True:
        elapsed = timed(count)
        if elapsed >= target or count >= most:
            elapsed = min(elapsed, timed(count), timed(count))
            if count >= most:
                break
            if elapsed >= target / 2:
                # A run of one call that lasts the whole target is taken as
                # it is only when it lasts several times that: right after a
                # compilation three runs of one 0.15 ms call (a threaded
                # numba kernel) took 1 to 8 ms, and a chain of one call would
                # then be timed, mostly its launch.
                if elapsed >= seconds and (count > 1 or elapsed >= _TRUSTED_ALONE * seconds):
                    break
                twice = least(2 * count)
                if twice >= 1.5 * elapsed:
                    # Here the calls are at least half of the run; a launch
                    # longer than ``seconds`` still leaves one call.
                    per_call = (twice - elapsed) / count
                    launch = max(0.0, elapsed - count * per_call)
                    return max(1, min(most, round((seconds - launch) / per_call)))
                # Twice the calls took about as long: the run was mostly its
                # launch (slow for a while after a compilation), not calls.
                count = min(most, 2 * count)
                continue
        grow = 10.0 if elapsed <= 0 else min(10.0, 1.2 * target / elapsed)
        count = min(most, max(count + 1, math.ceil(count * grow)))
    per_call = elapsed / count
    return max(1, min(most, round(seconds / max(per_call, 1e-12))))


#: A run of one call lasting this many times the target is taken as it is
#: (no process slows three runs in a row that much for long).
_TRUSTED_ALONE = 4


def interleaved(
    runs: Mapping[str, Callable[..., Any]],
    counts: Mapping[str, int],
    data: Sequence[Any],
    *,
    rounds: int,
    seconds: float = math.inf,
    min_rounds: int = 1,
    warmup_rounds: int = WARMUP_ROUNDS,
    settle: float | None = None,
    seed: int = 0,
    prime: bool = True,
    quiet: bool = True,
    starts: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Microseconds per call of each run (made by :func:`chained`, chaining
    ``counts[name]`` calls), round by round, every run once a round.

    ``warmup_rounds`` untimed rounds come first (thrown away: the first runs
    after a compilation fault in fresh buffers and wake thread pools). The
    order is shuffled every round (the same sequence in every call with the
    same ``seed``), so that
    no run always follows the same one: what a run leaves behind (caches
    filled with its data) falls on every other run alike instead of always
    on its successor. Before each timed run the
    process pauses ``settle`` seconds (untimed; None: :data:`SETTLE_SECONDS`),
    so that threads the previous run left spinning are asleep again. With
    ``prime`` (the default) each timed run follows one untimed call of its
    own program: a run then finds its data in the caches, as every call of
    a chain but the first does, instead of whatever the run before it left
    there (a sparse product over a few MiB took 3-5 times as long right
    after a threaded XLA operation as right after itself, and a chain of one
    such call would time that). With ``quiet`` (the default) each timed run,
    its untimed call included, starts once no other thread of the process is
    running (:class:`_quiet.Quiet`, untimed): what the run before left
    running (XLA returning a program's temporary buffers to the system after
    its outputs were ready, a threaded kernel's spinning workers) then falls on
    no other run. At most ``rounds`` timed rounds; once ``min_rounds`` are
    done, no new round starts after ``seconds`` (pauses and waits included).
    Where ``starts`` is given, the clock's reading at the start of each timed
    run is appended to ``starts[name]``, in the order of the times."""
    order = list(runs)
    arrays = {b: jnp.asarray(counts[b], dtype=jnp.int32) for b in order}
    one = jnp.asarray(1, dtype=jnp.int32)
    times: dict[str, list[float]] = {b: [] for b in order}
    shuffle = random.Random(seed).shuffle
    for _ in range(warmup_rounds):
        for name in order:
            jax.block_until_ready(runs[name](arrays[name], *data))
    pause = SETTLE_SECONDS if settle is None else settle
    start_all = _now()
    with Quiet(enabled=quiet) as waiting:
        for r in range(rounds):
            if r >= min_rounds and _now() - start_all > seconds:
                break
            shuffle(order)
            for name in order:
                waiting.wait()
                if prime:
                    jax.block_until_ready(runs[name](one, *data))
                if pause > 0:
                    _sleep(pause)
                start = _now()
                jax.block_until_ready(runs[name](arrays[name], *data))
                times[name].append((_now() - start) * 1e6 / counts[name])
                if starts is not None:
                    starts.setdefault(name, []).append(start)
    return times


def _chained(fn: Callable[..., Any], n: int) -> Callable[..., Any]:
    run = chained(fn)
    count = jnp.asarray(n, dtype=jnp.int32)
    return lambda *data: run(count, *data)


def benchmark_function(
    fn: Callable[..., Any],
    *,
    n_warmup: int,
    n_runs: int,
    n_batch_per_run: int = 1,
    data: Sequence[Any] = (),
) -> Timing:
    """Time ``fn(*data)``: ``n_warmup`` untimed runs, then ``n_runs`` timed ones.

    Each timed interval ends when every output is ready
    (``jax.block_until_ready``), so asynchronous dispatch does not hide work.
    With ``n_batch_per_run > 1`` a run is one compiled program that calls
    ``fn`` that many times in a loop, each call tied to the previous one so
    that XLA can neither hoist nor drop a call; ``fn`` must then be traceable
    by ``jax.jit``. Reported times are per call. With ``n_batch_per_run=1``
    ``fn`` is called as given: pass a jitted function to time compiled code.

    Args:
        fn: the function to time.
        n_warmup: untimed runs first, at least 0 (compilation happens in the
            first; with 0, in the first timed run).
        n_runs: timed runs, at least 1.
        n_batch_per_run: calls per timed run, at least 1; use more for calls
            so short that the timer and the dispatch would dominate.
        data: the positional arguments of ``fn``.

    Returns:
        A ``Timing`` with the per-call time of every run and the last output.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> t = benchmark_function(jax.jit(jnp.sin), n_warmup=1, n_runs=3, data=(jnp.ones(8),))
        >>> len(t.times_ms), t.min_ms <= t.mean_ms
        (3, True)
    """
    if not callable(fn):
        raise TypeError(f"`fn` must be callable, got {type(fn)!r}")
    n_warmup = check_count("n_warmup", n_warmup, 0)
    n_runs = check_count("n_runs", n_runs, 1)
    n_batch_per_run = check_count("n_batch_per_run", n_batch_per_run, 1)
    if isinstance(data, str | bytes) or not isinstance(data, Sequence):
        raise TypeError(
            f"`data` must be a tuple or list of the arguments of `fn`, got {type(data)!r}"
        )
    data = tuple(data)
    call = fn if n_batch_per_run == 1 else _chained(fn, n_batch_per_run)

    output = None
    for _ in range(n_warmup):
        output = jax.block_until_ready(call(*data))
    times = []
    for _ in range(n_runs):
        start = _now()
        output = jax.block_until_ready(call(*data))
        elapsed = _now() - start
        times.append(elapsed * 1e3 / n_batch_per_run)
    return Timing(times_ms=tuple(times), output=output)
