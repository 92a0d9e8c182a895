"""Operations the export check runs in a fresh process, which imports this
module by name (the tests put its folder on ``sys.path``)."""

import os

import jax
import jax.numpy as jnp
import numba
from numba_cpu_ffi import numba_kernel

_VECTOR = jax.ShapeDtypeStruct((4,), jnp.float32)


@numba.njit
def _double(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]


double = numba_kernel(_double, _VECTOR)

# A value that differs in every process, compiled into the kernel: its digest,
# and so its FFI target name, differ too.
_SALT = os.getpid()


@numba.njit
def _salted_double(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i] + 0 * _SALT


salted_double = numba_kernel(_salted_double, _VECTOR)
