"""Differentiating a numba kernel: refused with a message naming the kernel and
the fix, also through a sharding rule; and what numba_kernel shares with every
bridge (the vmap methods, the compile-error base)."""

from __future__ import annotations

import re

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.testing import differentiation_refused_message
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from numba_cpu_ffi import VMAP_METHODS, KernelCompileError, numba_kernel

KERNEL = "numba kernel 'scale'"
JVP = differentiation_refused_message(KERNEL, "jvp")
TRANSPOSE = differentiation_refused_message(KERNEL, "linear_transpose")


@numba.njit
def scale(x, out):
    for i in range(x.size):
        out[i] = 2.0 * x[i]


def _op(x):
    return numba_kernel(scale, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


X = jnp.arange(8, dtype=jnp.float32)


def test_grad_names_the_fix():
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.make_jaxpr(jax.grad(lambda x: _op(x).sum()))(X)


def test_jvp_names_the_fix():
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.jvp(_op, (X,), (X,))


def test_vjp_names_the_fix():
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.vjp(_op, X)


def test_linear_transpose_names_the_fix():
    with pytest.raises(NotImplementedError, match=re.escape(TRANSPOSE)):
        jax.linear_transpose(_op, X)(X)


def test_grad_with_respect_to_another_argument_runs():
    grad = jax.grad(lambda s, x: (s * _op(x)).sum())(1.0, X)
    np.testing.assert_allclose(grad, 2.0 * X.sum())


def test_grad_through_a_sharding_rule_names_the_fix():
    mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
    x = jax.device_put(X, NamedSharding(mesh, P("d")))
    op = numba_kernel(scale, jax.ShapeDtypeStruct(X.shape, X.dtype), sharding_rule="elementwise")
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.jit(jax.grad(lambda a: op(a).sum()))(x)


def test_shared_with_every_bridge():
    assert VMAP_METHODS is ffi_core.bridge.VMAP_METHODS
    assert issubclass(KernelCompileError, ffi_core.KernelCompileError)
    assert issubclass(KernelCompileError, TypeError)
