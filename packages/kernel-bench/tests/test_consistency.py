"""The suite's verdict and the autotuner agree: fake backends of known cost on a fake clock."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xla_custom_kernel as xck
from jax.experimental import io_callback
from kernel_bench import BenchmarkConfig, BenchmarkRecord, _program, _timing, benchmark_kernel
from kernel_bench._consistency import check_consistency, forget_stale
from kernel_bench.autotune import _cache as _autotune_cache
from kernel_bench.autotune import _decide as _autotune_decide
from kernel_bench.autotune import _measure as _autotune_measure

_names = itertools.count()


class FakeClock:
    """A clock that only the backends move: each call adds its known cost."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def costing(self, seconds: float | Callable[[], float]):
        """A backend doubling its input that costs ``seconds`` of this clock per
        call (or what ``seconds()`` says at each call)."""

        def tick() -> np.ndarray:
            self.now += seconds() if callable(seconds) else seconds
            return np.zeros((), np.float32)

        def backend(x):
            spent = io_callback(tick, jax.ShapeDtypeStruct((), jnp.float32))
            return 2 * x + spent

        return backend


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(_timing, "_clock", fake)
    # The reference op costs 50 us a call too: free, its chains would grow to
    # the most calls a run may hold, and take seconds of real time.
    reference = _timing.chained(fake.costing(5e-5))
    monkeypatch.setattr(_program, "_reference_run", lambda: reference)
    return fake


def _op(clock, costs):
    op = xck.XLACustomKernel(f"consistency_test_{next(_names)}")
    for name, seconds in costs.items():
        backend = clock.costing(seconds)
        op.def_kernel(name, "cpu", lambda outs, fn=backend: fn)
    op.def_call(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    op.def_benchmark_data(
        lambda *, platform: [BenchmarkConfig("n=16", (np.arange(16, dtype=np.float32),))]
    )
    return op


@pytest.mark.parametrize(
    "costs",
    [
        {"slow": 300e-6, "fast": 100e-6, "medium": 200e-6},
        {"fast": 50e-6, "slow": 400e-6},
        {"medium": 200e-6, "slow": 300e-6, "fast": 20e-6},
    ],
)
def test_the_verdict_and_the_autotuner_agree(clock, costs):
    op = _op(clock, costs)
    result = benchmark_kernel(
        op, platform="cpu", n_warmup=1, n_runs=3, autotune=True, seconds_per_run=1e-3
    )
    assert [r.backend for r in result.records] == [*costs, "auto"]
    assert all(r.success for r in result.records)
    by_backend = {r.backend: r for r in result.records}
    # Every time is the known cost, in program and as a dispatch: the clock is exact.
    for backend, seconds in costs.items():
        r = by_backend[backend]
        assert r.program_median_ms == pytest.approx(seconds * 1e3)
        assert r.median_ms == pytest.approx(seconds * 1e3)
        # Each in-program run chains about 1 ms of calls.
        assert r.rounds == 3 and abs(r.program_calls * seconds - 1e-3) <= seconds
    # The verdict: the cheapest backend. The autotuner: the same one, measured here.
    label = f"{op.name}/n=16"
    assert result.fastest(label).backend in ("fast", "auto")
    decision = by_backend["auto"].autotune
    assert decision["backend"] == "fast" and decision["source"] == "measured"
    ranked = sorted(costs.values())
    assert decision["margin"] == pytest.approx(ranked[1] / ranked[0])
    assert by_backend["auto"].program_median_ms == pytest.approx(costs["fast"] * 1e3)
    assert check_consistency(result.records) == ([], 1)


def test_a_decision_from_disk_that_the_run_contradicts_is_forgotten(clock, monkeypatch):
    # A quiet machine whatever else runs beside the test: a decision made on a
    # busy one is not settled, and the next process would measure it again.
    monkeypatch.setattr(_autotune_measure, "OtherLoad", lambda: _QuietMachine())
    costs = {"a": 100e-6, "b": 300e-6}
    op = xck.XLACustomKernel(f"consistency_test_{next(_names)}")
    for name in costs:
        backend = clock.costing(lambda name=name: costs[name])
        op.def_kernel(name, "cpu", lambda outs, fn=backend: fn)
    op.def_call(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    op.def_benchmark_data(
        lambda *, platform: [BenchmarkConfig("n=16", (np.arange(16, dtype=np.float32),))]
    )

    def run():
        jax.clear_caches()  # "auto" is chosen again where the program is lowered
        result = benchmark_kernel(
            op, platform="cpu", n_warmup=1, n_runs=3, autotune=True, seconds_per_run=1e-3
        )
        return result.records, next(r for r in result.records if r.backend == "auto").autotune

    records, decision = run()
    assert (decision["backend"], decision["source"]) == ("a", "measured")
    assert check_consistency(records) == ([], 1)
    # A later process, on a machine where b has become the faster: auto reads
    # a from the disk, and the run times it slower than b beyond the noise.
    _autotune_decide._memory.clear()
    _autotune_cache._disk.clear()
    costs.update(a=300e-6, b=100e-6)
    records, decision = run()
    assert (decision["backend"], decision["source"]) == ("a", "disk")
    (found,), _ = check_consistency(records)
    assert found.stale_key == decision["key"] and found.reason.startswith("decision from disk")
    (forgotten,) = forget_stale([found])
    assert forgotten.reason == (
        f"{found.reason}; removed from the autotune cache, so the next run measures it again"
    )
    assert _autotune_cache.from_disk("cpu", decision["key"], op.name, ("a", "b")) is None
    # Said once: nothing is left to forget.
    assert forget_stale([found]) == [found]
    # The next run measures again and picks b.
    records, decision = run()
    assert (decision["backend"], decision["source"]) == ("b", "measured")
    assert check_consistency(records) == ([], 1)


class _QuietMachine:
    def share(self) -> float:
        return 0.0


def rec(backend, program, *, spread=0.01, noise=0.01, autotune=None):
    return BenchmarkRecord(
        "cpu", backend, "k/n=1", program, 0.0, program, 1e3 / program, True,
        program_median_ms=program, program_q25_ms=program * (1 - spread),
        program_q75_ms=program * (1 + spread), program_min_ms=program * (1 - spread),
        rounds=10, noise=noise, autotune=autotune,
    )  # fmt: skip


def decided(backend, *, source="measured", margin=2.0, noise=0.02, busy=False, load=None, ms=None):
    return {
        "backend": backend,
        "source": source,
        "signature": "float32[1]",
        "margin": margin,
        "runner_up": "numba",
        "noise": noise,
        "busy": busy,
        "load": load,
        **({"ms_per_call": ms} if ms is not None else {}),
    }


@pytest.mark.parametrize(
    ("auto", "reason"),
    [
        (rec("auto", 2.0, autotune=decided("numba")), "noise: auto runs numba, the fastest"),
        (
            rec("auto", 2.0, autotune=decided("jax", source="disk")),
            "decision from disk: measured in an earlier process, where it measured jax 2.00x "
            "ahead; this run measured jax at 2 ms",
        ),
        (
            rec("auto", 2.0, autotune=decided("jax", busy=True)),
            "machine busy when decided, where it measured jax 2.00x ahead; this run measured "
            "jax at 2 ms",
        ),
        (
            rec("auto", 2.0, autotune=decided("jax", busy=True, load=0.48)),
            "machine busy when decided (other processes used 48% of the CPUs), where it "
            "measured jax 2.00x ahead; this run measured jax at 2 ms",
        ),
        (
            rec("auto", 2.0, autotune=decided("jax", margin=1.03)),
            "tie within noise: the autotuner's margin was 1.03x (its noise 2%); this run "
            "measured jax at 2 ms",
        ),
        (
            # The autotuner timed jax at 1 ms and numba at 2: here jax took 2, numba 1.
            rec("auto", 2.0, noise=0.3, autotune=decided("jax", ms={"jax": 1.0, "numba": 2.0})),
            "times moved since the autotuner's rounds: jax 1 ms there, 2 ms here (2.00x); "
            "numba 2 ms there, 1 ms here (0.50x)",
        ),
        (
            # Within the autotuner's noise of its own figures: not "moved".
            rec("auto", 2.0, noise=0.3, autotune=decided("jax", ms={"jax": 1.95, "numba": 1.02})),
            "machine noisy: the reference op spread 30% in this run; this run measured jax at 2 ms",
        ),
        (
            rec("auto", 2.0, noise=0.3, autotune=decided("jax")),
            "machine noisy: the reference op spread 30% in this run; this run measured jax at 2 ms",
        ),
        (
            rec("auto", 2.0, autotune=decided("jax")),
            "different data or rounds: the autotuner timed the same program on its own data "
            "of the call's shapes, in its own rounds, where it measured jax 2.00x ahead; "
            "this run measured jax at 2 ms",
        ),
        (rec("auto", 2.0), "no decision recorded: auto ran without the autotuner"),
    ],
)
def test_each_disagreement_says_why(auto, reason):
    records = [rec("numba", 1.0), rec("jax", 2.0), auto]
    (found,), compared = check_consistency(records)
    assert compared == 1
    assert found.reason.startswith(reason), found.reason
    assert (found.best, found.best_ms, found.auto_ms, found.ratio) == ("numba", 1.0, 2.0, 2.0)
    assert found.picked == (auto.autotune or {}).get("backend")


@pytest.mark.parametrize(
    "auto",
    [
        rec("auto", 1.04, autotune=decided("jax")),  # within 5 %
        rec("auto", 1.5, spread=0.4, autotune=decided("jax")),  # quartiles overlap
        rec("auto", 0.9, autotune=decided("numba")),  # faster
    ],
)
def test_within_the_noise_is_no_disagreement(auto):
    assert check_consistency([rec("numba", 1.0, spread=0.1), auto]) == ([], 1)


def test_cases_without_auto_or_in_program_times_are_not_compared():
    no_program = BenchmarkRecord("cpu", "auto", "k/n=1", 1.0, 0.0, 1.0, 1e3, True)
    assert check_consistency([rec("numba", 1.0), no_program]) == ([], 0)
    assert check_consistency([rec("numba", 1.0)]) == ([], 0)


@pytest.mark.parametrize(
    ("source", "picked", "stale"),
    [
        ("disk", "jax", True),
        ("disk", "numba", False),  # auto ran the fastest backend: timing noise
        ("measured", "jax", False),
        ("process 0", "jax", False),  # process 0's decision, not this machine's disk
    ],
)
def test_only_a_decision_read_from_disk_that_picked_another_backend_is_stale(source, picked, stale):
    auto = rec("auto", 2.0, autotune={**decided(picked, source=source), "key": "k" * 32})
    (found,), _ = check_consistency([rec("numba", 1.0), rec("jax", 2.0), auto])
    assert found.stale_key == ("k" * 32 if stale else None)


def test_the_suite_forgets_a_stale_decision_made_with_cpus_kept_awake(
    clock, monkeypatch, tmp_path, capsys
):
    # kernel-bench run holds the wake-up latency request (a writable stand-in
    # file here), so its decisions go to the file of decisions made with idle
    # CPUs kept awake: a stale one is forgotten in that file, and the next run
    # measures it again.
    import sys
    import types

    from kernel_bench._cli import main

    latency = tmp_path / "cpu_dma_latency"
    latency.write_bytes(b"\xff" * 4)
    monkeypatch.setattr("kernel_bench._awake.LATENCY_FILE", str(latency))
    monkeypatch.setattr(_autotune_measure, "OtherLoad", lambda: _QuietMachine())
    costs = {"a": 100e-6, "b": 300e-6}
    op = _op(clock, {name: (lambda name=name: costs[name]) for name in costs})
    monkeypatch.setitem(sys.modules, "kernel_bench_stale_target", types.SimpleNamespace(op=op))
    argv = ["run", "kernel_bench_stale_target:op", "--n-runs", "3", "--n-warmup", "1"]
    argv += ["--autotune", "--no-progress", "--no-plot"]

    def run(number):
        jax.clear_caches()  # "auto" is chosen again where the program is lowered
        out = tmp_path / f"run{number}.json"
        assert main([*argv, "--output", str(out)]) == 0
        from kernel_bench import BenchmarkResult

        result = BenchmarkResult.load(out)
        decision = next(r for r in result.records if r.backend == "auto").autotune
        return decision, result.metadata["consistency"], capsys.readouterr().out

    decision, consistency, _ = run(1)
    assert (decision["backend"], decision["source"]) == ("a", "measured")
    assert consistency == {"compared": 1, "disagreements": []}
    # A later process on a machine where b has become the faster.
    _autotune_decide._memory.clear()
    _autotune_cache._disk.clear()
    costs.update(a=300e-6, b=100e-6)
    decision, consistency, out = run(2)
    assert (decision["backend"], decision["source"]) == ("a", "disk")
    (found,) = consistency["disagreements"]
    assert found["reason"].startswith("decision from disk")
    assert found["reason"].endswith(
        "; removed from the autotune cache, so the next run measures it again"
    )
    assert found["reason"] in out
    _autotune_decide._memory.clear()
    _autotune_cache._disk.clear()
    decision, consistency, _ = run(3)
    assert (decision["backend"], decision["source"]) == ("b", "measured")
    assert consistency == {"compared": 1, "disagreements": []}
