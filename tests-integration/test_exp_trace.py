"""Exponential trace update through XLACustomKernel: numba and jax backends
under jit, vmap and grad (the update is linear in the trace and the spikes)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from kernel_bench.examples import exp_trace

BACKENDS = ("numba", "jax")
DT, TAU = 0.5, 4.0


def reference(trace, spikes):
    return trace * np.exp(-DT / TAU) + spikes


def update(backend):
    return lambda trace, spikes: exp_trace.call(trace, spikes, dt=DT, tau=TAU, backend=backend)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    trace = rng.random(257, dtype=np.float32)
    spikes = (rng.random(257) < 0.2).astype(np.float32)
    return trace, spikes


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("jit", [False, True])
def test_matches_reference(backend, jit, data):
    f = update(backend)
    out = (jax.jit(f) if jit else f)(*data)
    np.testing.assert_allclose(out, reference(*data), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap(backend, data):
    traces = np.stack([data[0] * k for k in range(5)])
    out = jax.jit(jax.vmap(update(backend), in_axes=(0, None)))(traces, data[1])
    np.testing.assert_allclose(out, reference(traces, data[1][None]), rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad(backend, data):
    weights = np.linspace(-1, 1, data[0].size, dtype=np.float32)

    def loss(trace, spikes):
        return jnp.sum(weights * update(backend)(trace, spikes))

    g_trace, g_spikes = jax.jit(jax.grad(loss, argnums=(0, 1)))(*data)
    np.testing.assert_allclose(g_trace, weights * np.exp(-DT / TAU), rtol=1e-6)
    np.testing.assert_allclose(g_spikes, weights, rtol=1e-6)
    with jax.enable_x64(True):
        args = tuple(x.astype(np.float64) for x in data)
        check_grads(update(backend), args, order=2, modes=["fwd", "rev"])
        check_grads(jax.vmap(update(backend)), tuple(np.stack([a, 2 * a]) for a in args), order=1)
