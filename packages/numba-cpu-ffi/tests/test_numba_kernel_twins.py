"""The handler calls private twins of the kernel (same function, options and
locals, without Numba's Python and C wrappers): the user's dispatcher is not
compiled for the handler's types, and behaves as it did."""

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from numba_cpu_ffi import numba_kernel

S = jax.ShapeDtypeStruct


def _total():
    # A new dispatcher for each test: none has compiled it yet.
    @numba.njit(error_model="numpy", locals={"acc": numba.float32})
    def twin_total(x, out):
        acc = 0.0
        for i in range(x.size):
            acc += x[i] / 0.0 if x[i] < 0 else x[i] / 3
        out[0] = acc

    return twin_total


@numba.njit(parallel=True)
def twin_parallel(x, out):
    for i in numba.prange(x.size):
        out[i] = x[i] + 1


@pytest.mark.parametrize("vmapped", [False, True])
def test_the_users_dispatcher_is_not_compiled(vmapped):
    twin_total = _total()
    f = numba_kernel(twin_total, S((1,), jnp.float32))
    x = jnp.arange(5, dtype=jnp.float32)
    if vmapped:
        got = jax.jit(jax.vmap(f))(jnp.stack([x, 2 * x]))
        np.testing.assert_allclose(got[:, 0], [10 / 3, 20 / 3], rtol=1e-6)
    else:
        np.testing.assert_allclose(jax.jit(f)(x), [10 / 3], rtol=1e-6)
        # error_model="numpy" is kept: a division by zero gives inf, not an error.
        assert jax.jit(f)(-x)[0] == -np.inf
    assert twin_total.signatures == []
    # The user's dispatcher still compiles and runs as before.
    out = np.zeros(1, np.float32)
    twin_total(np.asarray(x), out)
    np.testing.assert_allclose(out, [10 / 3], rtol=1e-6)


def test_a_parallel_kernel_keeps_its_options():
    f = numba_kernel(twin_parallel, S((4,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(f)(jnp.array([1.0, 2.0, 3.0, 4.0])), [2, 3, 4, 5])
    assert twin_parallel.signatures == []
