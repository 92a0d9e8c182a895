"""What numba_cuda_kernel and numba_cuda_callable share with every bridge:
ffi-core's conformance suite run over both (names, compile error, vmap
methods, with the kernel's own "fold", dtype messages, differentiation
refused naming the kernel and the fix, the cache kept out of the user's)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from ffi_core.testing import BridgeUnderTest, conformance_tests
from numba import cuda
from numba_cuda_ffi import (
    CALLABLE_VMAP_METHODS,
    SUPPORTED_DTYPES,
    VMAP_METHODS,
    KernelCompileError,
    numba_cuda_callable,
    numba_cuda_kernel,
)
from numba_cuda_ffi._compile import CACHE_ENV


@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2.0 * x[i]


def twice(x, out, stream):
    scale[1, 8, stream](x, out)


def _kernel(outs: jax.ShapeDtypeStruct, **options):
    return numba_cuda_kernel(scale, outs, launch_dims=8, **options)


def _callable(outs: jax.ShapeDtypeStruct, **options):
    return numba_cuda_callable(twice, outs, **options)


# The fix numba-cuda-ffi's refusal to differentiate names, stated whole.
FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for "
    "reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)


NUMBA_CUDA_KERNEL = BridgeUnderTest(
    kernel="numba cuda kernel 'scale'",
    make=_kernel,
    platform="gpu",
    compile_error=KernelCompileError,
    vmap_methods=VMAP_METHODS,
    own_vmap_methods=("fold",),
    dtypes_kernels="numba CUDA kernels",
    supported_dtypes=SUPPORTED_DTYPES,
    unsupported_dtype=jnp.bfloat16,
    inputs_kernel="kernel 'scale'",
    cache_env=CACHE_ENV,
    derivative_fix=FIX,
)

# Its call goes through jax.ffi.ffi_call, whose primitive's own rules would
# say only "Differentiation rule for 'ffi_call' not implemented".
NUMBA_CUDA_CALLABLE = BridgeUnderTest(
    kernel="numba cuda callable 'twice'",
    name="twice",
    make=_callable,
    platform="gpu",
    compile_error=KernelCompileError,
    vmap_methods=CALLABLE_VMAP_METHODS,
    dtypes_kernels="numba CUDA kernels",
    supported_dtypes=SUPPORTED_DTYPES,
    unsupported_dtype=jnp.bfloat16,
    inputs_kernel="callable 'twice'",
    vmap_method=None,
    derivative_fix=FIX,
)

TestKernelConformance = conformance_tests(NUMBA_CUDA_KERNEL)
TestCallableConformance = conformance_tests(NUMBA_CUDA_CALLABLE)
