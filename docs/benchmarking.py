"""Tutorial 3: benchmarking the backends of an operation and choosing one, by
hand or automatically per call signature (backend "auto").

Run it: ``uv run python docs/benchmarking.py``. Every step asserts its result,
so this file doubles as a test (CI runs it). The command ``uv run
kernel-bench`` does the same for the bundled example suite.
"""

import pathlib
import tempfile

import jax
import jax.numpy as jnp
import numba
import numpy as np
import xla_custom_kernel as xck
from kernel_bench import BenchmarkConfig, BenchmarkResult, benchmark_function
from xla_custom_kernel.testing import check_kernel

# --- 1. Timing one function ---------------------------------------------------
# Each timed run blocks until the results are ready. With n_batch_per_run > 1,
# one compiled program chains the calls so XLA can neither hoist nor drop any;
# reported times are per call.
x = jnp.linspace(0.0, 1.0, 4096, dtype=jnp.float32)
timing = benchmark_function(jax.jit(jnp.tanh), n_warmup=2, n_runs=5, data=(x,))
assert len(timing.times_ms) == 5 and timing.min_ms <= timing.mean_ms
chained = benchmark_function(jnp.tanh, n_warmup=1, n_runs=3, n_batch_per_run=50, data=(x,))
np.testing.assert_allclose(chained.output, jnp.tanh(x), rtol=1e-6)

# --- 2. An operation with two backends and benchmark data ---------------------


@numba.njit(parallel=True)
def softplus_numba(x, out):
    for i in numba.prange(x.size):
        out[i] = np.log1p(np.exp(-abs(x[i]))) + max(x[i], 0.0)


softplus = xck.XLACustomKernel("tutorial_softplus", doc="log(1 + exp(x))")
softplus.def_numba_kernel(lambda outs: softplus_numba)
softplus.def_jax_kernel(lambda outs: jax.nn.softplus)


@softplus.def_call
def softplus_call(x):
    return softplus(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


@softplus.def_benchmark_data
def softplus_data(*, platform):
    rng = np.random.default_rng(0)
    for n in (1_000, 100_000):
        x = rng.standard_normal(n).astype(np.float32)
        yield BenchmarkConfig(f"n={n}", (x,), data_kwargs={"n": n})


# Before timing the backends, check that they compute one thing under jit and
# under vmap: check_kernel (Tutorial 8 shows all it checks).
report = check_kernel(
    softplus,
    np.linspace(-3.0, 3.0, 8, dtype=np.float32),
    reference=lambda x: np.logaddexp(np.float32(0), x),
    checks=["results", "backends", "vmap"],
)
assert report.ok and "backends: backend 'jax'" in [r.check for r in report.passed]

# --- 3. Benchmark every backend ------------------------------------------------
# Results of all backends are compared (rtol/atol); a failing or mismatching
# backend is recorded with its error instead of stopping the run.
result = softplus.benchmark(platform="cpu", n_warmup=2, n_runs=5)
assert {r.backend for r in result.records} == {"numba", "jax"}
assert all(r.success for r in result.records), [r.error for r in result.records]
result.print(speedup_vs="jax")

# --- 4. Save, load, plot -------------------------------------------------------
with tempfile.TemporaryDirectory() as tmp:
    for name in ("softplus.json", "softplus.csv"):
        path = pathlib.Path(tmp) / name
        result.save(path)
        again = BenchmarkResult.load(path)
        assert [r.mean_ms for r in again.records] == [r.mean_ms for r in result.records]
    png = pathlib.Path(tmp) / "softplus.png"
    result.plot(png)
    assert png.read_bytes()[:4] == b"\x89PNG"

# --- 5. Choose the backend ------------------------------------------------------
# Make the fastest backend on the largest case the default: the switch takes
# effect on the next call, also for functions jitted before.
best = result.fastest("tutorial_softplus/n=100000").backend
softplus.set_default("cpu", best)
y = jax.jit(softplus.call)(x)
np.testing.assert_allclose(y, jax.nn.softplus(x), rtol=1e-5, atol=1e-6)
print(f"default backend on cpu: {best}")

# --- 6. Or let each call signature choose: backend "auto" ----------------------
# The fastest backend depends on the size (and the machine, dtype, batch):
# "auto" measures every backend the first time XLA lowers a call of a new
# signature, checks that their results agree, keeps the fastest on disk
# (~/.cache/kernel-bench/autotune) and uses it from then on, in this process
# and the next. explain() shows the candidates and the choice.
from kernel_bench import autotune  # noqa: E402

autotune.set_budget(0.1)  # seconds of timing per new decision (default 0.2)
softplus.set_default("cpu", "auto")
for n in (100, 100_000):
    xs = jnp.linspace(-3.0, 3.0, n, dtype=jnp.float32)
    with autotune.recording() as decisions:
        y = jax.jit(softplus.call)(xs)  # decided while this call is lowered
    np.testing.assert_allclose(y, jax.nn.softplus(xs), rtol=1e-5, atol=1e-6)
    (decision,) = decisions
    assert decision.backend in ("numba", "jax") and decision.source in ("measured", "disk")
    print(f"n={n}: auto uses {decision.backend}")
decision = softplus.explain(xs, outs=jax.ShapeDtypeStruct(xs.shape, xs.dtype))
assert {c.backend for c in decision.candidates} == {"numba", "jax"}
assert softplus.fixed_default("cpu") == best  # used where nothing can be measured

print("all steps passed")
