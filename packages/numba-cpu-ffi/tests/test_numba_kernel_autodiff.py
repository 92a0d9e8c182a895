"""Differentiating a numba kernel at run time: a gradient with respect to
another argument runs; one through a sharding rule is refused with a message
naming the kernel and the fix (each transform's refusal at trace level is in
test_kit.py, ffi-core's conformance suite)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.testing import differentiation_refused_message
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from numba_cpu_ffi import numba_kernel

KERNEL = "numba kernel 'scale'"
# numba-cpu-ffi's fix, stated whole.
FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for "
    "reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)
JVP = differentiation_refused_message(KERNEL, "jvp", FIX)


@numba.njit
def scale(x, out):
    for i in range(x.size):
        out[i] = 2.0 * x[i]


def _op(x):
    return numba_kernel(scale, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


X = jnp.arange(8, dtype=jnp.float32)


def test_grad_with_respect_to_another_argument_runs():
    grad = jax.grad(lambda s, x: (s * _op(x)).sum())(1.0, X)
    np.testing.assert_allclose(grad, 2.0 * X.sum())


def test_grad_through_a_sharding_rule_names_the_fix():
    mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
    x = jax.device_put(X, NamedSharding(mesh, P("d")))
    op = numba_kernel(scale, jax.ShapeDtypeStruct(X.shape, X.dtype), sharding_rule="elementwise")
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.jit(jax.grad(lambda a: op(a).sum()))(x)
