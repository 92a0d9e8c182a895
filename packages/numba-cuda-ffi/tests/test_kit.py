"""What numba_cuda_kernel shares with every bridge: the vmap methods (with its
own "fold"), the compile-error base, and differentiation refused with a
message naming the kernel and the fix (at trace level, on the emulated GPU)."""

from __future__ import annotations

import re

import ffi_core
import jax
import jax.numpy as jnp
import pytest
from ffi_core.cuda.testing import emulated_gpu_fixture
from ffi_core.testing import DIFFERENTIATION_TRANSFORMS, check_differentiation_refused
from numba import cuda
from numba_cuda_ffi import (
    CALLABLE_VMAP_METHODS,
    VMAP_METHODS,
    KernelCompileError,
    numba_cuda_kernel,
)

S = jax.ShapeDtypeStruct
KERNEL = "numba cuda kernel 'scale'"


@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2.0 * x[i]


X = jnp.arange(8, dtype=jnp.float32)
OP = numba_cuda_kernel(scale, S(X.shape, X.dtype), launch_dims=8)


# Tracing only: nothing is lowered, so no handler is built against this driver.
gpu = emulated_gpu_fixture()


@pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
def test_differentiation_names_the_fix(gpu, transform):
    check_differentiation_refused(OP, X, kernel=KERNEL, transform=transform)


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
