"""What numba_cuda_kernel shares with every bridge: the vmap methods (with its
own "fold"), the compile-error base, and differentiation refused with a
message naming the kernel and the fix (at trace level, on the emulated GPU)."""

from __future__ import annotations

import re

import ffi_core
import jax
import jax.numpy as jnp
import pytest
from ffi_core.cuda.testing import EmulatedGPU, emulate
from numba import cuda
from numba_cuda_ffi import (
    CALLABLE_VMAP_METHODS,
    VMAP_METHODS,
    KernelCompileError,
    numba_cuda_kernel,
)

S = jax.ShapeDtypeStruct
FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` "
    "for reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)
KERNEL = "numba cuda kernel 'scale'"
JVP = f"{KERNEL} has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; {FIX}"
TRANSPOSE = f"{KERNEL} has no transpose rule, so jax.linear_transpose cannot transpose it; {FIX}"


@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2.0 * x[i]


X = jnp.arange(8, dtype=jnp.float32)
OP = numba_cuda_kernel(scale, S(X.shape, X.dtype), launch_dims=8)


@pytest.fixture
def gpu():
    # Tracing only: nothing is lowered, so no handler is built against this driver.
    with emulate(EmulatedGPU()) as emulated:
        yield emulated


def test_grad_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.make_jaxpr(jax.grad(lambda x: OP(x).sum()))(X)


def test_jvp_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.make_jaxpr(lambda x: jax.jvp(OP, (x,), (x,)))(X)


def test_vjp_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.make_jaxpr(lambda x: jax.vjp(OP, x)[0])(X)


def test_linear_transpose_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(TRANSPOSE)):
        jax.make_jaxpr(lambda x: jax.linear_transpose(OP, x)(x))(X)


def test_shared_with_every_bridge():
    assert VMAP_METHODS == (*ffi_core.VMAP_METHODS, "fold")
    assert CALLABLE_VMAP_METHODS is ffi_core.VMAP_METHODS
    assert issubclass(KernelCompileError, ffi_core.KernelCompileError)
    assert issubclass(KernelCompileError, TypeError)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', "
            "'expand_dims', 'broadcast_all', 'fold', got 'loop'"
        ),
    ):
        numba_cuda_kernel(scale, S(X.shape, X.dtype), launch_dims=8, vmap_method="loop")
