"""One operation with two CPU backends, switched at run time: the results are
equal, and the switch reaches functions that were jitted before it."""

import jax
import numpy as np
import pytest
import xla_custom_kernel as xck
from kernel_bench.examples import axpy


@pytest.fixture
def restore_defaults():
    before = axpy.get_default("cpu")
    yield
    axpy.set_default("cpu", before)
    xck.set_backend(None)


def args():
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal(1000).astype(np.float32),
        rng.standard_normal(1000).astype(np.float32),
        np.float32([0.75]),
    )


def test_switch_default_at_run_time(restore_defaults):
    f = jax.jit(axpy.call)
    results = {}
    for backend in ("numba", "jax", "numba"):
        axpy.set_default("cpu", backend)
        text = f.lower(*args()).as_text()
        assert ("stablehlo.custom_call" in text) == (backend == "numba")
        results[backend] = np.asarray(f(*args()))
    np.testing.assert_allclose(results["numba"], results["jax"], rtol=1e-5, atol=1e-6)
    x, y, a = args()
    np.testing.assert_allclose(results["numba"], a[0] * x + y, rtol=1e-5, atol=1e-6)


def test_process_wide_preference_and_per_call(restore_defaults):
    axpy.set_default("cpu", "numba")
    xck.set_backend("jax")
    f = jax.jit(axpy.call)
    assert "stablehlo.custom_call" not in f.lower(*args()).as_text()
    per_call = jax.jit(lambda *a: axpy.call(*a, backend="numba"))
    assert "stablehlo.custom_call" in per_call.lower(*args()).as_text()
    np.testing.assert_allclose(f(*args()), per_call(*args()), rtol=1e-5, atol=1e-6)
