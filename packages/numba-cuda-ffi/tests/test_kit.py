"""What numba_cuda_kernel shares with every bridge: the vmap methods (with its
own "fold"), the compile-error base, and differentiation refused with a
message naming the kernel and the fix (at trace level, on the emulated GPU)."""

from __future__ import annotations

import re

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import pytest
from ffi_core.bridge.cuda.testing import emulated_gpu_fixture
from ffi_core.testing import DIFFERENTIATION_TRANSFORMS, check_differentiation_refused
from numba import cuda
from numba_cuda_ffi import (
    CALLABLE_VMAP_METHODS,
    VMAP_METHODS,
    KernelCompileError,
    numba_cuda_callable,
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
    assert VMAP_METHODS == (*ffi_core.bridge.VMAP_METHODS, "fold")
    assert CALLABLE_VMAP_METHODS is ffi_core.bridge.VMAP_METHODS
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


def twice(x, out, stream):
    scale[1, 8, stream](x, out)


CALLABLE = numba_cuda_callable(twice, S(X.shape, X.dtype))


@pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
def test_callable_differentiation_names_the_fix(gpu, transform):
    # Its call goes through jax.ffi.ffi_call, whose primitive's own rules
    # would say only "Differentiation rule for 'ffi_call' not implemented".
    check_differentiation_refused(
        CALLABLE, X, kernel="numba cuda callable 'twice'", transform=transform
    )


@pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
def test_callable_differentiation_under_vmap_names_the_fix(gpu, transform):
    check_differentiation_refused(
        jax.vmap(CALLABLE),
        jnp.stack([X, X]),
        kernel="numba cuda callable 'twice'",
        transform=transform,
    )


@pytest.mark.parametrize(
    ("op", "kernel"),
    [
        (
            numba_cuda_kernel(
                scale, S(X.shape, X.dtype), launch_dims=8, sharding_rule="elementwise"
            ),
            KERNEL,
        ),
        (
            numba_cuda_callable(twice, S(X.shape, X.dtype), sharding_rule="elementwise"),
            "numba cuda callable 'twice'",
        ),
    ],
)
def test_linear_transpose_of_a_sharded_call_names_the_fix(gpu, op, kernel):
    # A call with a sharding rule goes through ffi_core's partitioned call;
    # transposing it runs the kernel's own rule, whose message names it.
    check_differentiation_refused(op, X, kernel=kernel, transform="linear_transpose")
