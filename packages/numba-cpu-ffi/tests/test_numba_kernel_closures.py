"""Kernels made by one factory differ only in their closure values; each must
get its own handler (a shared FFI target would silently run the wrong one)."""

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from numba_cpu_ffi import numba_kernel


def make_scaler(factor):
    @numba.njit
    def scale(x, out):
        for i in range(x.size):
            out[i] = factor * x[i]

    return scale


def make_table_lookup(table):
    @numba.njit
    def lookup(idx, out):
        for i in range(idx.size):
            out[i] = table[idx[i]]

    return lookup


@pytest.mark.parametrize("jit", [False, True])
def test_closures_with_different_scalars_get_their_own_handlers(jit):
    x = jnp.arange(4, dtype=jnp.float32)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    results = []
    for factor in (2.0, 3.0, -1.5):
        f = numba_kernel(make_scaler(np.float32(factor)), out)
        results.append(np.asarray((jax.jit(f) if jit else f)(x)))
    for factor, r in zip((2.0, 3.0, -1.5), results, strict=True):
        np.testing.assert_array_equal(r, factor * np.arange(4, dtype=np.float32))


def test_closures_with_different_arrays_get_their_own_handlers():
    idx = jnp.array([0, 2, 1], dtype=jnp.int32)
    out = jax.ShapeDtypeStruct((3,), jnp.float32)
    a = numba_kernel(make_table_lookup(np.array([1.0, 2.0, 3.0], np.float32)), out)
    b = numba_kernel(make_table_lookup(np.array([10.0, 20.0, 30.0], np.float32)), out)
    np.testing.assert_array_equal(a(idx), [1.0, 3.0, 2.0])
    np.testing.assert_array_equal(b(idx), [10.0, 30.0, 20.0])


_KERNELS = """
import numba

@numba.njit
def offset(x):
    return x + OFFSET

@numba.njit
def scale(x, out):
    for i in range(x.size):
        out[i] = SCALE * offset(x[i])
"""


def _kernels(scale, offset):
    # The same source run again with other globals, as when a notebook cell
    # that defines a kernel is rerun after a constant changed.
    import types

    module = types.ModuleType("user_kernels")
    module.SCALE, module.OFFSET = scale, offset
    exec(_KERNELS, module.__dict__)
    return module.scale


@pytest.mark.parametrize("jit", [False, True])
def test_kernels_redefined_with_other_globals_get_their_own_handlers(jit):
    x = jnp.arange(4, dtype=jnp.float32)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    for scale, offset in ((2.0, 0.0), (3.0, 0.0), (3.0, 1.0)):  # the last through `offset`
        f = numba_kernel(_kernels(scale, offset), out)
        result = (jax.jit(f) if jit else f)(x)
        np.testing.assert_array_equal(result, scale * (np.arange(4, dtype=np.float32) + offset))
