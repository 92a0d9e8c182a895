"""One Euler step of leaky integrate-and-fire neurons with two outputs of
different dtypes, run for 100 steps inside lax.scan on each backend."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from kernel_bench.examples import lif_step

PARAMS = {"dt": 0.5, "tau": 5.0, "v_th": 1.0, "v_reset": -0.2}


def numpy_run(v, currents):
    alpha = np.float32(PARAMS["dt"] / PARAMS["tau"])
    spikes = []
    for i_ext in currents:
        x = v + alpha * (i_ext - v)
        fired = x >= PARAMS["v_th"]
        v = np.where(fired, np.float32(PARAMS["v_reset"]), x).astype(np.float32)
        spikes.append(fired)
    return v, np.stack(spikes)


def simulate(backend, v0, currents):
    def step(v, i_ext):
        v_new, spike = lif_step.call(v, i_ext, backend=backend, **PARAMS)
        return v_new, spike

    return jax.jit(lambda v0, cs: lax.scan(step, v0, cs))(v0, currents)


@pytest.fixture
def inputs():
    rng = np.random.default_rng(0)
    v0 = rng.random(300, dtype=np.float32)
    currents = (2.5 * rng.random((100, 300))).astype(np.float32)
    return v0, currents


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_100_steps_in_scan(backend, inputs):
    v, spikes = simulate(backend, *inputs)
    assert v.dtype == jnp.float32 and spikes.dtype == jnp.bool_
    assert spikes.shape == (100, 300)
    v_ref, spikes_ref = numpy_run(*inputs)
    np.testing.assert_array_equal(spikes, spikes_ref)
    np.testing.assert_allclose(v, v_ref, rtol=1e-6, atol=1e-6)
    assert 0 < int(spikes.sum()) < spikes.size  # the test exercises both branches


def test_backends_agree_under_vmap(inputs):
    v0, currents = inputs
    batch = np.stack([v0, v0 * 0.5, v0 * 0.1])
    results = [
        jax.vmap(functools.partial(simulate, b), in_axes=(0, None))(batch, currents)
        for b in ("numba", "jax")
    ]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6, atol=1e-6)
