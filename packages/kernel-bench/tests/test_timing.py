"""benchmark_function: how many calls run, what is returned, what is refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.testing import whole_message
from kernel_bench import Timing, benchmark_function
from numba_cpu_ffi import numba_kernel


def counting_callback(counter: list[int]):
    """A traceable function whose host calls are counted: XLA may hoist or drop it."""

    def host(x):
        counter[0] += 1
        return np.asarray(x) * 2

    def fn(x):
        return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    return fn


@pytest.mark.parametrize("n_batch", [1, 2, 7])
@pytest.mark.parametrize(("n_warmup", "n_runs"), [(0, 1), (2, 3)])
def test_every_chained_call_runs(n_warmup, n_runs, n_batch):
    counter = [0]
    fn = counting_callback(counter)
    x = jnp.arange(4.0)
    timing = benchmark_function(
        jax.jit(fn), n_warmup=n_warmup, n_runs=n_runs, n_batch_per_run=n_batch, data=(x,)
    )
    assert counter[0] == (n_warmup + n_runs) * n_batch
    assert len(timing.times_ms) == n_runs
    # Chained calls all see the original inputs.
    np.testing.assert_array_equal(timing.output, x * 2)


@numba.njit
def _affine(x, out):
    for i in range(x.size):
        out[i] = 3.0 * x[i] + 1.0


def test_chained_numba_kernel_gives_the_single_call_result():
    x = jnp.linspace(0, 1, 16, dtype=jnp.float32)
    op = numba_kernel(_affine, jax.ShapeDtypeStruct(x.shape, x.dtype))
    timing = benchmark_function(op, n_warmup=1, n_runs=2, n_batch_per_run=5, data=(x,))
    np.testing.assert_allclose(timing.output, 3 * x + 1, rtol=1e-6)


def test_unbatched_calls_fn_as_given():
    calls = []

    def fn(a, b):
        calls.append((a, b))
        return jnp.asarray(a + b)

    timing = benchmark_function(fn, n_warmup=1, n_runs=4, data=[1, 2])
    assert calls == [(1, 2)] * 5
    assert int(timing.output) == 3
    assert all(t >= 0 for t in timing.times_ms)


def test_pytree_outputs_are_waited_for_and_returned():
    x = jnp.ones(3)
    timing = benchmark_function(
        jax.jit(lambda x: {"a": x + 1, "b": (x * 2,)}),
        n_warmup=0,
        n_runs=1,
        n_batch_per_run=3,
        data=(x,),
    )
    np.testing.assert_array_equal(timing.output["a"], x + 1)
    np.testing.assert_array_equal(timing.output["b"][0], x * 2)


def test_timing_statistics():
    t = Timing(times_ms=(1.0, 2.0, 3.0, 6.0), output=None)
    assert t.mean_ms == 3.0
    assert t.min_ms == 1.0
    assert t.std_ms == pytest.approx(np.std([1.0, 2.0, 3.0, 6.0]))
    assert Timing(times_ms=(4.0,), output=None).std_ms == 0.0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_warmup": -1}, ValueError, "`n_warmup` must be at least 0, got -1"),
        ({"n_runs": 0}, ValueError, "`n_runs` must be at least 1, got 0"),
        ({"n_batch_per_run": 0}, ValueError, "`n_batch_per_run` must be at least 1, got 0"),
        ({"n_runs": 2.5}, TypeError, "`n_runs` must be an int, got 2.5"),
        ({"n_runs": True}, TypeError, "`n_runs` must be an int, got True"),
        (
            {"data": "xy"},
            TypeError,
            "`data` must be a tuple or list of the arguments of `fn`, got <class 'str'>",
        ),
    ],
)
def test_bad_arguments(kwargs, error, message):
    args = {"n_warmup": 0, "n_runs": 1, "data": ()} | kwargs
    with pytest.raises(error, match=whole_message(message)):
        benchmark_function(jnp.zeros, **args)


def test_fn_must_be_callable():
    with pytest.raises(TypeError, match=whole_message("`fn` must be callable, got <class 'int'>")):
        benchmark_function(3, n_warmup=0, n_runs=1)


def test_spread_is_robust_to_an_outlier():
    from kernel_bench._timing import Spread

    calm = Spread.of([1.0, 1.1, 0.9, 1.0, 1.05])
    stormy = Spread.of([1.0, 1.1, 0.9, 1.0, 100.0])
    assert (calm.median, stormy.median) == (1.0, 1.0)
    assert (stormy.min, stormy.q25, stormy.q75, stormy.n) == (0.9, 1.0, 1.1, 5)
    assert stormy.relative_iqr == pytest.approx(0.1)
    assert Timing((3.0, 1.0, 2.0), None).spread == Spread(2.0, 1.0, 1.5, 2.5, 3)
    with pytest.raises(
        ValueError, match=whole_message("`values` must hold at least one measurement, got none")
    ):
        Spread.of([])


def test_in_program_times_with_a_fake_clock(monkeypatch):
    from jax.experimental import io_callback
    from kernel_bench import _program, _timing

    now = [0.0]

    def costing(seconds):
        def tick():
            now[0] += seconds
            return np.zeros((), np.float32)

        return lambda x: x + io_callback(tick, jax.ShapeDtypeStruct((), jnp.float32))

    monkeypatch.setattr(_timing, "_clock", lambda: now[0])
    # The reference op costs 50 us a call on this clock (chained 60 times a run).
    reference = _timing.chained(costing(5e-5))
    monkeypatch.setattr(_program, "_reference_run", lambda: reference)
    runs = {"a": _timing.chained(costing(1e-4)), "b": _timing.chained(costing(3e-4))}
    _timed, counts, failed = _program._calibrated(runs, (jnp.ones(4),), 3e-3, {})
    assert failed == {}
    assert counts["a"] == 30 and counts["b"] == 10 and counts[_program.REFERENCE_OP] == 60
    case = _program.InProgram(runs, (jnp.ones(4),), _case(runs).records)
    [(a, b)] = _program.program_times([case], n_runs=4, seconds=3e-3)
    assert (a.program_calls, b.program_calls) == (30, 10) and a.rounds == b.rounds == 4
    assert a.program_median_ms == pytest.approx(0.1) and a.program_q75_ms == pytest.approx(0.1)
    assert b.program_median_ms == pytest.approx(0.3) and b.program_min_ms == pytest.approx(0.3)
    # The reference op's rounds (all 50 us) spread by nothing.
    assert a.noise == b.noise == 0.0


def _case(runs, picked=None):
    """One case for ``_program.program_times``: a record per backend of
    ``runs`` (``picked``: the backend "auto" ran, in its record)."""
    from kernel_bench import _program
    from kernel_bench._record import BenchmarkRecord

    def record(backend):
        decision = {"backend": picked} if backend == "auto" and picked else None
        return BenchmarkRecord("cpu", backend, "k/c", 1.0, 0.0, 1.0, 1e3, True, autotune=decision)

    return _program.InProgram(runs, (), tuple(record(b) for b in runs))


def _fake_runs(monkeypatch, costs, launch=0.0):
    """Python stand-ins for chained programs on a fake clock: ``run(count)``
    advances it by ``launch`` plus ``count`` times the run's cost per call, and
    logs (name, count)."""
    from kernel_bench import _timing

    now, log = [0.0], []
    monkeypatch.setattr(_timing, "_clock", lambda: now[0])

    def make(name, cost):
        def run(count, *data):
            count = int(count)
            now[0] += launch + count * cost
            log.append((name, count))
            return jnp.zeros(())

        return run

    return {name: make(name, cost) for name, cost in costs.items()}, log


def test_calls_per_run_chains_at_most_its_limit(monkeypatch):
    from kernel_bench import _timing

    # A run that costs nothing on the clock: the chain stops at ``most``.
    runs, log = _fake_runs(monkeypatch, {"free": 0.0})
    assert _timing.calls_per_run(runs["free"], (), 1e-3, most=5000) == 5000
    assert max(c for _, c in log) == 5000


def test_calls_per_run_is_not_fooled_by_the_launch(monkeypatch):
    from kernel_bench import _timing

    # A call of 10 ns behind a launch of 20 us: a guess from one run of a few
    # calls would chain about 100 calls (a run of 21 us, nearly all launch).
    runs, log = _fake_runs(monkeypatch, {"tiny": 1e-8}, launch=2e-5)
    count = _timing.calls_per_run(runs["tiny"], (), 1e-2)
    assert 0.9e6 <= count <= 1e6
    # Growing at most tenfold a step, and the last length checked at twice
    # itself: a dozen runs, the longest half the target or a little more.
    assert len(log) <= 13 and max(c for _, c in log) * 1e-8 < 0.6e-2


def test_calls_per_run_fills_the_run_with_calls_less_the_launch(monkeypatch):
    from kernel_bench import _timing

    # A call of 0.1 us behind a launch (and wait) of 120 us, as the reference
    # op's on a 2-core machine: a run of 1 ms holds 8,800 calls. A time per
    # call taken from the quarter-length chain alone, launch and all, chained
    # about 6,000 (runs of 0.7 ms).
    runs, log = _fake_runs(monkeypatch, {"ref": 1e-7}, launch=1.2e-4)
    assert _timing.calls_per_run(runs["ref"], (), 1e-3) == 8800
    assert max(c for _, c in log) < 8800  # no run as long as the target was needed


def test_calls_per_run_is_not_fooled_by_a_slow_launch_after_compiling(monkeypatch):
    from kernel_bench import _timing

    # For the first five runs after compiling, the launch takes 300 us, then
    # 20 us; a call takes 10 ns. Three slow runs of one call look like a
    # quarter of a 1 ms run of 300 us calls: a chain of 3 calls, all launch.
    now, launches = [0.0], [3e-4] * 5

    def run(count, *data):
        now[0] += (launches.pop(0) if launches else 2e-5) + int(count) * 1e-8
        return jnp.zeros(())

    monkeypatch.setattr(_timing, "_clock", lambda: now[0])
    # Twice the calls took no longer: the chain grows on to 1 ms of calls.
    assert 0.9e5 <= _timing.calls_per_run(run, (), 1e-3) <= 1e5


def test_calls_per_run_is_not_fooled_by_slow_single_calls_after_compiling(monkeypatch):
    from kernel_bench import _timing

    # A call of 150 us (20 us launch) whose first runs after compiling take
    # 1 to 8 ms longer: three runs of one call all last more than the 1 ms
    # target. Two calls take no longer, so one call is not the chain.
    now, slow = [0.0], [0.0, 7.9e-3, 1.0e-3, 6.2e-3, 1.2e-3]

    def run(count, *data):
        now[0] += 2e-5 + int(count) * 1.5e-4 + (slow.pop(0) if slow else 0.0)
        return jnp.zeros(())

    monkeypatch.setattr(_timing, "_clock", lambda: now[0])
    assert 5 <= _timing.calls_per_run(run, (), 1e-3) <= 7


def test_calls_per_run_takes_one_long_call_as_it_is(monkeypatch):
    from kernel_bench import _timing

    # One call of 5 ms: a chain of one, and no run of two calls to check it.
    runs, log = _fake_runs(monkeypatch, {"slow": 5e-3}, launch=2e-5)
    assert _timing.calls_per_run(runs["slow"], (), 1e-3) == 1
    assert {count for _, count in log} == {1}


def test_interleaved_throws_away_the_warm_up_and_shuffles(monkeypatch):
    from kernel_bench import _timing

    runs, log = _fake_runs(monkeypatch, {"a": 1e-4, "b": 2e-4, "c": 3e-4, "d": 4e-4})
    times = _timing.interleaved(runs, dict.fromkeys(runs, 10), (), rounds=8)
    assert {b: len(t) for b, t in times.items()} == dict.fromkeys(runs, 8)
    assert times["a"] == pytest.approx([100.0] * 8) and times["d"] == pytest.approx([400.0] * 8)
    # One warm-up round first, in registration order, untimed.
    assert [name for name, _ in log[:4]] == ["a", "b", "c", "d"] and len(log) == 4 + 2 * 4 * 8
    # Each timed run follows one untimed call of its own program (its data
    # back in the caches), and that call is not in its time.
    primes, timed = log[4::2], log[5::2]
    assert [name for name, _ in primes] == [name for name, _ in timed]
    assert {count for _, count in primes} == {1} and {count for _, count in timed} == {10}
    # No run always follows the same one: each meets at least two predecessors.
    before: dict[str, set[str]] = {}
    for i in range(len(timed)):
        if i % 4:
            before.setdefault(timed[i][0], set()).add(timed[i - 1][0])
    assert all(len(p) >= 2 for p in before.values()), before


def test_calls_per_run_is_not_fooled_by_one_pause(monkeypatch):
    from kernel_bench import _timing

    now = [0.0]
    extra = [0.0, 5e-3]

    def run(count, *data):
        now[0] += 2e-5 + int(count) * 1e-7 + (extra.pop(0) if extra else 0.0)
        return jnp.zeros(())

    monkeypatch.setattr(_timing, "_clock", lambda: now[0])
    # The first timed run (1 call, after the warm-up) is paused for 5 ms,
    # past a quarter of the target: the two runs after it are not, and the
    # chain grows on to a count that is 10 ms of 100 ns calls.
    assert 0.9e5 <= _timing.calls_per_run(run, (), 1e-2) <= 1e5


def _fake_reference(monkeypatch, runs_of_fake_clock):
    # The reference op as one more fake run (its real program would chain ten
    # million calls on a clock that only the fake runs move).
    from kernel_bench import _program

    monkeypatch.setattr(_program, "_reference_run", lambda: runs_of_fake_clock["reference"])


@pytest.mark.parametrize("rounds", [3, 5])
def test_program_times_traces_every_timed_run(monkeypatch, rounds):
    # Fake backends on a fake clock: the trace holds each timed run once,
    # with the case's index and the time the records' medians come from.
    from kernel_bench import _program, _timing
    from kernel_bench._program import REFERENCE_OP
    from kernel_bench._timing import Spread

    runs, _log = _fake_runs(monkeypatch, {"numba": 2e-4, "jax": 1e-4, "reference": 1e-6})
    _fake_reference(monkeypatch, runs)
    cases = [_case({"numba": runs["numba"]}), _case({"jax": runs["jax"]})]
    trace = []
    measured = _program.program_times(
        cases, n_runs=rounds, seconds=_timing.SECONDS_PER_RUN, trace=trace
    )
    assert len(trace) == 2 * 2 * rounds  # two cases, a backend and the reference op each
    assert len({start for start, *_ in trace}) == len(trace)  # each run its own start
    for i, records in enumerate(measured):
        for r in records:
            times = [us for _, case, name, us in trace if case == i and name == r.backend]
            assert len(times) == rounds
            assert Spread.of(times).median == pytest.approx(r.program_median_ms * 1e3)
    assert {name for _, _, name, _ in trace} == {"numba", "jax", REFERENCE_OP}


def test_the_autotuner_and_the_suite_time_the_same_chains(monkeypatch):
    # Backends of known cost on a fake clock: the autotuner's measurement and
    # the suite's in-program column chain as many calls per run and see the
    # same time per call, so that the verdict and the pick rest on one figure.
    from kernel_bench import _program, _timing
    from kernel_bench._timing import Spread
    from kernel_bench.autotune import _measure

    costs = {"numba": 2e-4, "jax": 1e-4, "warp": 7e-6}
    runs, _log = _fake_runs(monkeypatch, {**costs, "reference": 1e-6}, launch=2e-5)
    _fake_reference(monkeypatch, runs)
    fake = {b: runs[b] for b in costs}
    [suite] = _program.program_times([_case(fake)], n_runs=5, seconds=_timing.SECONDS_PER_RUN)
    tuner_times, tuner_counts = _measure._time(fake, (), budget=0.2)
    assert tuner_counts == {r.backend: r.program_calls for r in suite}
    assert tuner_counts["numba"] < tuner_counts["jax"] < tuner_counts["warp"]
    for r in suite:
        assert Spread.of(tuner_times[r.backend]).median == pytest.approx(r.program_median_ms * 1e3)
    # And the suite's defaults are that run length.
    import inspect

    from kernel_bench import benchmark_kernel
    from kernel_bench._suite_cli import PROGRAM_SECONDS

    default = inspect.signature(benchmark_kernel).parameters["seconds_per_run"].default
    assert default == _timing.SECONDS_PER_RUN
    assert set(PROGRAM_SECONDS.values()) == {_timing.SECONDS_PER_RUN}


def test_the_autotuner_chains_again_what_it_calibrated_too_short(monkeypatch):
    # Calibrated in a slow moment, each chain is one call: its rounds (launch
    # 50 us, calls of 150 and 100 us) last a fifth of the 1 ms target. The
    # chains are calibrated again, by the rule that made them (the calls
    # fill the run less the launch), and the rounds done afresh.
    from kernel_bench import _timing
    from kernel_bench.autotune import _measure

    runs, _log = _fake_runs(monkeypatch, {"numba": 1.5e-4, "jax": 1e-4}, launch=5e-5)
    calibrated = []

    def slow_at_first(run, data, seconds):
        calibrated.append(run)
        return 1 if calibrated.count(run) == 1 else _timing.calls_per_run(run, data, seconds)

    monkeypatch.setattr(_measure, "calls_per_run", slow_at_first)
    times, counts = _measure._time(runs, (), budget=0.2)
    assert counts == {"numba": 6, "jax": 10}  # (1000 - 50) / 150 and / 100 us, rounded
    assert len(calibrated) == 4
    # Every round kept is one of the new chains (one-call rounds: 200, 150 us).
    assert times["numba"] == pytest.approx([150 + 50 / 6] * len(times["numba"]))
    assert times["jax"] == pytest.approx([100 + 50 / 10] * len(times["jax"]))
    assert len(times["jax"]) >= _measure.MIN_ROUNDS


def test_auto_chains_as_many_calls_as_the_backend_it_ran(monkeypatch):
    from kernel_bench import _program

    runs, log = _fake_runs(monkeypatch, {"numba": 2e-4, "auto": 2e-4, "reference": 1e-6})
    _fake_reference(monkeypatch, runs)
    fake = {b: runs[b] for b in ("numba", "auto")}
    [(numba, auto)] = _program.program_times(
        [_case(fake, picked="numba")], n_runs=3, seconds=1e-3, passes=3
    )
    assert auto.program_calls == numba.program_calls == 5
    # Not calibrated on its own: its first run is the first pass's warm-up.
    first_auto = next(i for i, (name, _) in enumerate(log) if name == "auto")
    counts = [count for name, count in log[first_auto:] if name == "auto"]
    # Each pass: the warm-up run, then the timed run after its untimed call of one.
    assert counts == [5, 1, 5] * 3
    assert auto.program_median_ms == pytest.approx(numba.program_median_ms)


def test_interleaved_pauses_before_each_timed_run_and_does_not_time_the_pause(monkeypatch):
    from kernel_bench import _timing

    runs, log = _fake_runs(monkeypatch, {"a": 1e-6, "b": 2e-6})
    now = [0.0]
    clock = _timing._clock
    paused = []

    def sleep(seconds):
        # A pause that moves the clock: timing it would show in the results.
        paused.append((seconds, len(log)))
        monkeypatch.setattr(_timing, "_clock", lambda: clock() + now[0])
        now[0] += seconds

    monkeypatch.setattr(_timing, "_sleep", sleep)
    times = _timing.interleaved(runs, {"a": 10, "b": 10}, (), rounds=3, settle=0.5)
    assert times["a"] == pytest.approx([1.0] * 3) and times["b"] == pytest.approx([2.0] * 3)
    # One pause before each of the 6 timed runs (none in the warm-up round:
    # runs 0 and 1), after the untimed call that precedes each.
    assert paused == [(0.5, k) for k in range(3, 15, 2)]


def test_interleaved_without_prime_times_each_run_after_the_one_before(monkeypatch):
    from kernel_bench import _timing

    runs, log = _fake_runs(monkeypatch, {"a": 1e-6, "b": 2e-6})
    times = _timing.interleaved(runs, {"a": 10, "b": 10}, (), rounds=3, prime=False)
    assert times["a"] == pytest.approx([1.0] * 3) and times["b"] == pytest.approx([2.0] * 3)
    assert len(log) == 2 + 6 and {count for _, count in log} == {10}


def test_interleaved_without_settle_does_not_pause(monkeypatch):
    from kernel_bench import _timing

    runs, _ = _fake_runs(monkeypatch, {"a": 1e-6})
    monkeypatch.setattr(_timing, "_sleep", lambda s: pytest.fail("paused"))
    assert _timing.interleaved(runs, {"a": 5}, (), rounds=2, settle=0) == {
        "a": pytest.approx([1.0, 1.0])
    }


def test_program_times_runs_the_rounds_of_all_cases_in_passes(monkeypatch):
    from kernel_bench import _program
    from kernel_bench._record import BenchmarkRecord

    runs, _log = _fake_runs(
        monkeypatch, {"a_numba": 2e-4, "a_jax": 1e-4, "b_numba": 3e-4, "reference": 1e-6}
    )
    _fake_reference(monkeypatch, runs)

    def record(label, backend):
        return BenchmarkRecord("cpu", backend, label, 1.0, 0.0, 1.0, 1e3, True)

    cases = [
        _program.InProgram(
            {"numba": runs["a_numba"], "jax": runs["a_jax"]},
            (),
            (record("k/a", "numba"), record("k/a", "jax")),
        ),
        _program.InProgram({"numba": runs["b_numba"]}, (), (record("k/b", "numba"),)),
    ]
    calls, interleaved = [], _program.interleaved

    def spy(timed, counts, data, *, rounds, seed, starts):
        calls.append((sorted(timed), rounds, seed))
        return interleaved(timed, counts, data, rounds=rounds, seed=seed, starts=starts)

    monkeypatch.setattr(_program, "interleaved", spy)
    seen = []
    measured = _program.program_times(
        cases, n_runs=6, seconds=1e-3, passes=3, progress=lambda *a: seen.append(a)
    )
    assert [[r.rounds for r in found] for found in measured] == [[6, 6], [6]]
    assert measured[0][0].program_median_ms == pytest.approx(0.2)
    assert measured[0][1].program_median_ms == pytest.approx(0.1)
    assert measured[1][0].program_median_ms == pytest.approx(0.3)
    assert all(r.noise == 0.0 for found in measured for r in found)
    # Three passes, each two rounds of every case (and its warm-up round,
    # inside interleaved), the cases in turn: no case has all its rounds in
    # one stretch of time.
    a, b = ["jax", "numba", "reference op"], ["numba", "reference op"]
    assert len(calls) == 6 and all(rounds == 2 for _, rounds, _ in calls)
    assert all(sorted(names for names, _, _ in calls[i : i + 2]) == [a, b] for i in (0, 2, 4))
    # Each pass shuffles its rounds another way.
    assert [seed for _, _, seed in calls] == [0, 0, 1, 1, 2, 2]
    assert seen[-1] == (6, 6, "done") and seen[0][2] == "in program, pass 1 of 3"
