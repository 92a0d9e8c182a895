import re

import jax
import jax.numpy as jnp
import numba
import pytest
from numba_cpu_ffi import numba_kernel


@numba.njit
def boom(x, out):
    if x[0] < 0:
        raise ValueError("negative")
    out[:] = x


def test_ctx():
    f = numba_kernel(
        boom, jax.ShapeDtypeStruct((3,), jnp.float32), error_context='op "x", backend \\ numba'
    )
    assert (jax.jit(f)(jnp.ones(3, jnp.float32)) == 1).all()
    with pytest.raises(
        Exception,
        match=re.escape(
            """numba kernel 'boom' (op "x", backend \\ numba) raised ValueError: negative"""
        ),
    ):
        jax.block_until_ready(jax.jit(f)(-jnp.ones(3, jnp.float32)))
    with pytest.raises(
        TypeError, match=re.escape("`error_context` must be a str or None, got <class 'int'>")
    ):
        numba_kernel(boom, jax.ShapeDtypeStruct((3,), jnp.float32), error_context=3)
