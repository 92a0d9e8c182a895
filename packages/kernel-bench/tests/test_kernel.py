"""benchmark_kernel: records per case and backend, comparison, failures, refusals."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.testing import whole_message
from kernel_bench import BenchmarkConfig, ResultMismatchError, benchmark_kernel, default_platform
from kernel_bench._kernel import ENVIRONMENT
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel import XLACustomKernel

FAST = {"n_warmup": 0, "n_runs": 2}


def cases(*sizes):
    return [
        BenchmarkConfig(
            f"n={n}",
            (np.arange(n, dtype=np.float32),),
            kernel_kwargs={"a": 2.0},
            data_kwargs={"n": n},
        )
        for n in sizes
    ]


def scale(x, a):
    return x * a


def boom(x, a):
    raise RuntimeError("kernel exploded")


def test_one_record_per_case_and_backend(fake_kernel, monkeypatch):
    class Load:  # other processes' load over the in-program rounds
        def share(self):
            return 0.25

    monkeypatch.setattr("kernel_bench._kernel.OtherLoad", Load)
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "NUMBA_THREADING_LAYER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setenv("NUMBA_THREADING_LAYER", "omp")
    monkeypatch.setenv("KERNEL_BENCH_UNRELATED", "x")
    k = fake_kernel("scale", {"jax": scale, "numba": scale}, cases(4, 16), tags=("t",))
    result = benchmark_kernel(k, platform="cpu", **FAST)
    assert [(r.label, r.backend) for r in result.records] == [
        ("scale/n=4", "jax"),
        ("scale/n=4", "numba"),
        ("scale/n=16", "jax"),
        ("scale/n=16", "numba"),
    ]
    r = result.records[0]
    assert r.platform == "cpu" and r.success and r.error is None
    assert r.kernel_kwargs == {"a": 2.0} and r.data_kwargs == {"n": 4}
    assert r.min_ms <= r.mean_ms and r.throughput == pytest.approx(1e3 / r.mean_ms)
    assert {b for b, kw in k.calls} == {"jax", "numba"}
    assert all(kw == {"a": 2.0} for _, kw in k.calls)
    assert result.metadata["platform"] == "cpu"
    assert result.metadata["jax"] == jax.__version__
    assert result.metadata["other_load"] == 0.25
    # The settings that change how backends run, where set; no others.
    environment = result.metadata["environment"]
    assert environment["OMP_WAIT_POLICY"] == "ACTIVE"
    assert environment["NUMBA_THREADING_LAYER"] == "omp"
    assert "GOMP_SPINCOUNT" not in environment and "KERNEL_BENCH_UNRELATED" not in environment
    assert set(environment) <= set(ENVIRONMENT)


def test_default_platform_and_backend_selection(fake_kernel):
    k = fake_kernel(
        "scale",
        {"jax": scale, "numba": scale, "other": scale},
        cases(4),
        default="numba",
        platform=default_platform(),
    )
    result = benchmark_kernel(k, backends=["other", "jax"], **FAST)
    assert [r.backend for r in result.records] == ["other", "jax"]
    # The platform's default backend runs first: it is the reference of the comparison.
    result = benchmark_kernel(k, **FAST)
    assert [r.backend for r in result.records] == ["numba", "jax", "other"]


def test_mismatch_is_recorded_with_times(fake_kernel):
    k = fake_kernel("scale", {"jax": scale, "off": lambda x, a: x * a + 1.0}, cases(4))
    result = benchmark_kernel(k, platform="cpu", **FAST)
    off = result.records[1]
    assert not off.success and off.mean_ms is not None
    assert off.error == (
        "result differs from backend 'jax': output 0 at index (0,): expected 0.0, got 1.0 "
        "(4 of 4 elements differ, by up to 1; rtol=0.001, atol=0.001)"
    )
    assert result.fastest("scale/n=4").backend == "jax"
    # Within tolerance, or not compared at all: no mismatch.
    assert all(r.success for r in benchmark_kernel(k, platform="cpu", atol=2.0, **FAST).records)
    assert all(
        r.success
        for r in benchmark_kernel(k, platform="cpu", compare_results=False, **FAST).records
    )


@pytest.mark.parametrize(
    ("other", "problem"),
    [
        (lambda x, a: (x, x), "the output structure PyTreeDef((*, *)) differs from PyTreeDef(*)"),
        (lambda x, a: x[:2], "output 0 is float32[2], expected float32[4]"),
        (lambda x, a: (x * a).astype(jnp.int32), "output 0 is int32[4], expected float32[4]"),
    ],
)
def test_mismatched_structure_shape_dtype(fake_kernel, other, problem):
    k = fake_kernel("scale", {"jax": scale, "other": other}, cases(4))
    record = benchmark_kernel(k, platform="cpu", **FAST).records[1]
    assert record.error == f"result differs from backend 'jax': {problem}"


def test_mismatch_raises_without_catch_errors(fake_kernel):
    k = fake_kernel("scale", {"jax": scale, "off": lambda x, a: x * a + 1.0}, cases(4))
    with pytest.raises(
        ResultMismatchError,
        match=whole_message(
            "backend 'off' of kernel 'scale' on case 'n=4': result differs from backend 'jax': "
            "output 0 at index (0,): expected 0.0, got 1.0 (4 of 4 elements differ, by up to 1; "
            "rtol=0.001, atol=0.001)"
        ),
    ):
        benchmark_kernel(k, platform="cpu", catch_errors=False, **FAST)


def test_failing_backend_is_recorded_or_raised(fake_kernel):
    k = fake_kernel("scale", {"jax": scale, "bad": boom}, cases(4, 8))
    result = benchmark_kernel(k, platform="cpu", **FAST)
    bad = [r for r in result.records if r.backend == "bad"]
    assert len(bad) == 2
    for r in bad:
        assert not r.success
        assert r.error == "RuntimeError: kernel exploded"
        assert (r.mean_ms, r.std_ms, r.min_ms, r.throughput) == (None, None, None, None)
    with pytest.raises(RuntimeError, match=whole_message("kernel exploded")) as info:
        benchmark_kernel(k, platform="cpu", catch_errors=False, **FAST)
    assert info.value.__notes__[-1] == (
        "while benchmarking backend 'bad' of kernel 'scale' on case 'n=4'"
    )


def test_progress_and_verbose(fake_kernel, capsys):
    k = fake_kernel("scale", {"jax": scale, "bad": boom}, cases(4, 8))
    calls = []
    benchmark_kernel(k, platform="cpu", verbose=True, progress=lambda *a: calls.append(a), **FAST)
    assert calls == [
        (0, 5, "scale/n=4 jax"),
        (1, 5, "scale/n=4 bad"),
        (2, 5, "scale/n=8 jax"),
        (3, 5, "scale/n=8 bad"),
        (4, 5, "scale in program"),
        (5, 5, "done"),
    ]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    number = "[0-9.e+-]+"
    assert re.fullmatch(
        rf"scale/n=4  jax: median {number} ms, IQR {number} \(min {number}\)", lines[0]
    )
    assert lines[1] == "scale/n=4  bad: failed: RuntimeError: kernel exploded"


def test_batched_runs_call_every_backend(fake_kernel):
    counter = [0]

    def counted(x, a):
        def host(v):
            counter[0] += 1
            return np.asarray(v) * a

        return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    k = fake_kernel("scale", {"jax": scale, "cb": counted}, cases(4))
    result = benchmark_kernel(
        k, platform="cpu", n_warmup=1, n_runs=3, n_batch_per_run=4, measure_in_program=False
    )
    # The warm-up and the timed runs chain 4 calls each; each timed run
    # follows an untimed call of one (a call in a loop follows the one before).
    assert counter[0] == (1 + 3) * 4 + 3
    assert all(r.success for r in result.records)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"platform": "cuda"},
            ValueError,
            "`platform` must be None or one of 'cpu', 'gpu', 'tpu', got 'cuda'",
        ),
        ({"n_runs": 0}, ValueError, "`n_runs` must be at least 1, got 0"),
        ({"n_warmup": 1.5}, TypeError, "`n_warmup` must be an int, got 1.5"),
        ({"n_batch_per_run": 0}, ValueError, "`n_batch_per_run` must be at least 1, got 0"),
        ({"rtol": -1}, ValueError, "`rtol` must be a non-negative number, got -1"),
        ({"atol": "0"}, TypeError, "`atol` must be a non-negative number, got '0'"),
        (
            {"platform": 5},
            TypeError,
            "`platform` must be None or one of 'cpu', 'gpu', 'tpu', got 5",
        ),
        ({"catch_errors": "no"}, TypeError, "`catch_errors` must be a bool, got 'no'"),
        ({"measure_in_program": 0}, TypeError, "`measure_in_program` must be a bool, got 0"),
        (
            {"progress": 5},
            TypeError,
            "`progress` must be None or a callable progress(done, total, description), got 5",
        ),
        (
            {"backends": []},
            ValueError,
            "`backends` must name at least one backend (None: all of them); available: "
            "'jax', 'numba'",
        ),
        (
            {"backends": "jax"},
            TypeError,
            "`backends` must be None or a list of backend names, got 'jax'",
        ),
        (
            {"backends": ["jax", "cuda"]},
            ValueError,
            "`backends` entry 'cuda' is not a backend of kernel 'scale' on platform 'cpu'; available: 'jax', 'numba'",
        ),
        ({"platform": "gpu"}, ValueError, "kernel 'scale' has no backend for platform 'gpu'"),
    ],
)
def test_bad_arguments(fake_kernel, kwargs, error, message):
    k = fake_kernel("scale", {"jax": scale, "numba": scale}, cases(4))
    with pytest.raises(error, match=whole_message(message)):
        benchmark_kernel(k, **({"platform": "cpu"} | kwargs))


@pytest.mark.parametrize("kernel", [None, scale, "scale"])
def test_kernel_that_is_no_xla_custom_kernel(kernel):
    with pytest.raises(
        TypeError,
        match=whole_message(
            "`kernel` must be an xla_custom_kernel.XLACustomKernel with a call function and "
            f"benchmark data, got {type(kernel)!r}"
        ),
    ):
        benchmark_kernel(kernel, platform="cpu")


def test_tolerances_of_numpy_scalars(fake_kernel):
    k = fake_kernel("scale", {"jax": scale, "numba": scale}, cases(4))
    result = benchmark_kernel(
        k, platform="cpu", n_warmup=1, n_runs=2, rtol=np.float32(1e-3), atol=np.float64(0.0)
    )
    assert all(r.success for r in result.records)


def test_unavailable_platform(fake_kernel):
    platforms = {d.platform for d in jax.devices()}
    if "tpu" in platforms:
        pytest.skip("a TPU is present")
    k = fake_kernel("scale", {"jax": scale}, cases(4), platform="tpu")
    with pytest.raises(
        RuntimeError,
        match=whole_message(
            f"platform 'tpu' is not available to JAX (it has {', '.join(sorted(platforms))}); "
            "pick another `platform`, or install the jaxlib plugin for it"
        ),
    ):
        benchmark_kernel(k, platform="tpu", **FAST)


def test_kernel_without_call_or_data(fake_kernel):
    no_call = fake_kernel("scale", {"jax": scale}, cases(4), has_call=False)
    with pytest.raises(
        ValueError,
        match=whole_message(
            "kernel 'scale' has no call function to benchmark: register one with `@kernel.def_call`"
        ),
    ):
        benchmark_kernel(no_call, platform="cpu")
    no_data = fake_kernel("scale", {"jax": scale})
    with pytest.raises(
        ValueError,
        match=whole_message(
            "kernel 'scale' has no benchmark data: register a function returning "
            "BenchmarkConfig cases with `@kernel.def_benchmark_data`"
        ),
    ):
        benchmark_kernel(no_data, platform="cpu")


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ([], ValueError, "the benchmark data of kernel 'scale' has no cases"),
        (
            [(np.ones(2),)],
            TypeError,
            "the benchmark data of kernel 'scale' must be BenchmarkConfig objects (or objects with "
            "the fields name, args, kernel_kwargs, data_kwargs), got <class 'tuple'> at position 0",
        ),
        (cases(4, 4), ValueError, "the benchmark data of kernel 'scale' has two cases named 'n=4'"),
    ],
)
def test_bad_benchmark_data(fake_kernel, data, error, message):
    k = fake_kernel("scale", {"jax": scale}, lambda: data)
    with pytest.raises(error, match=whole_message(message)):
        benchmark_kernel(k, platform="cpu")


def test_benchmark_data_of_another_config_type(fake_kernel):
    # A library ported from the seed yields its own config class with the same fields.
    class SeedConfig:
        def __init__(self, name, args, kernel_kwargs, data_kwargs):
            self.name, self.args = name, args
            self.kernel_kwargs, self.data_kwargs = kernel_kwargs, data_kwargs

    data = [SeedConfig(c.name, c.args, c.kernel_kwargs, c.data_kwargs) for c in cases(4, 8)]
    k = fake_kernel("scale", {"jax": scale}, lambda: data)
    result = benchmark_kernel(k, platform="cpu", n_warmup=1, n_runs=2)
    assert sorted({r.data_kwargs["n"] for r in result.records}) == [4, 8]


# --- a real XLACustomKernel: a numba backend and a pure-JAX reference -------------------


@numba.njit
def _saxpy(x, y, a, out):
    for i in range(x.size):
        out[i] = a[0] * x[i] + y[i]


saxpy = XLACustomKernel("kernel_bench_test_saxpy", doc="a * x + y")
saxpy.def_tags("kernel-bench-test")
saxpy.def_numba_kernel(lambda outs, **kw: numba_kernel(_saxpy, outs))
saxpy.def_jax_kernel(lambda outs, **kw: lambda x, y, a: a[0] * x + y)


@saxpy.def_call
def _saxpy_call(x, y, a):
    return saxpy(x, y, a, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


@saxpy.def_benchmark_data
def _saxpy_data(*, platform):
    rng = np.random.default_rng(0)
    for n in (8, 1000):
        x, y = rng.standard_normal((2, n), dtype=np.float32)
        yield BenchmarkConfig(f"n={n}", (x, y, np.float32([0.5])), data_kwargs={"n": n})


@pytest.mark.parametrize("n_batch", [1, 3])
def test_real_kernel_numba_and_jax(n_batch):
    result = benchmark_kernel(saxpy, platform="cpu", n_warmup=1, n_runs=2, n_batch_per_run=n_batch)
    assert sorted((r.label, r.backend) for r in result.records) == [
        ("kernel_bench_test_saxpy/n=1000", "jax"),
        ("kernel_bench_test_saxpy/n=1000", "numba"),
        ("kernel_bench_test_saxpy/n=8", "jax"),
        ("kernel_bench_test_saxpy/n=8", "numba"),
    ]
    assert all(r.success for r in result.records), [r.error for r in result.records]


def test_real_kernel_benchmark_method():
    result = saxpy.benchmark(platform="cpu", n_warmup=0, n_runs=1, backends=["numba"])
    assert [r.backend for r in result.records] == ["numba", "numba"]


def test_real_kernel_without_benchmark_data():
    k = XLACustomKernel("kernel_bench_test_no_data")
    k.def_jax_kernel(lambda outs, **kw: lambda x: x)
    k.def_call(lambda x: k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    with pytest.raises(
        ValueError,
        match=whole_message(
            "kernel 'kernel_bench_test_no_data' has no benchmark data: register a function "
            "returning BenchmarkConfig cases with `@kernel.def_benchmark_data`"
        ),
    ):
        k.benchmark(platform="cpu")
