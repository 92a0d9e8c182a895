"""input_output_aliases: eager, under jit, with donation, under vmap."""

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from numba_cpu_ffi import numba_kernel

S = jax.ShapeDtypeStruct


@numba.njit
def increment(x, out):
    xf, of = x.ravel(), out.ravel()
    for i in range(xf.size):
        of[i] = xf[i] + 1


@numba.njit
def scale_into(a, y, out):
    # out aliases y: each element is read before it is written.
    for i in range(y.shape[0]):
        out[i] = a[i] * y[i]


def _x():
    return jnp.arange(6.0, dtype=jnp.float32)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_alias_without_donation_keeps_input(jit):
    f = numba_kernel(increment, S((6,), jnp.float32), input_output_aliases={0: 0})
    f = jax.jit(f) if jit else f
    x = _x()
    out = f(x)
    np.testing.assert_array_equal(out, _x() + 1)
    assert not x.is_deleted()
    np.testing.assert_array_equal(x, _x())


def test_alias_with_donation():
    f = numba_kernel(increment, S((6,), jnp.float32), input_output_aliases={0: 0})
    g = jax.jit(f, donate_argnums=0)
    x = _x()
    out = g(x)
    assert x.is_deleted()
    np.testing.assert_array_equal(out, _x() + 1)
    np.testing.assert_array_equal(g(out), _x() + 2)


def test_alias_of_second_input_with_donation():
    f = numba_kernel(scale_into, S((6,), jnp.float32), input_output_aliases={1: 0})
    a, y = _x(), _x() + 1
    out = jax.jit(f, donate_argnums=1)(a, y)
    assert y.is_deleted() and not a.is_deleted()
    np.testing.assert_array_equal(out, _x() * (_x() + 1))


@pytest.mark.parametrize("method", [None, "sequential", "expand_dims"])
def test_alias_under_vmap(method):
    f = numba_kernel(
        scale_into, S((6,), jnp.float32), input_output_aliases={1: 0}, vmap_method=method
    )
    a = _x()
    ys = jnp.stack([_x(), _x() + 1, _x() + 2])
    expected = ys * a[None]
    np.testing.assert_array_equal(jax.vmap(f)(jnp.stack([a] * 3), ys), expected)
    # The aliased input is unbatched here: it is broadcast to the batch first.
    np.testing.assert_array_equal(jax.vmap(f, in_axes=(0, None))(ys, a), ys * a[None])
