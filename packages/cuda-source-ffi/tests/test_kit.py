"""What a CUDA-source kernel shares with every bridge: ffi-core's conformance
suite run over cuda-source-ffi (names, compile error, vmap methods, dtype
messages, differentiation refused naming the kernel and the fix, the cache
kept out of the user's)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from cuda_source_ffi import NvrtcCompileError, load_cuda_inline
from cuda_source_ffi._nvrtc import _library
from cuda_source_ffi._nvrtc_cache import CACHE_ENV
from ffi_core.abi import SUPPORTED_DTYPES
from ffi_core.testing import BridgeUnderTest, conformance_tests

try:
    _library()
except ImportError as exc:  # pragma: no cover - NVRTC is in the workspace
    pytest.skip(str(exc), allow_module_level=True)

SCALE = """
extern "C" __global__ void scale(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
"""
MODULE = load_cuda_inline(SCALE, kernels={"scale": ["in", "out", "n:int32"]})


def _make(outs: jax.ShapeDtypeStruct, **options):
    # A sharded call launches one thread per element of its shard.
    launch = {"launch_dims": 8} if "sharding_rule" in options else {"grid": 1, "block": 8}
    return MODULE.kernel("scale", outs, **launch, **options)


# The fix cuda-source-ffi's refusal to differentiate names, stated whole.
FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for "
    "reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)


CUDA_SOURCE = BridgeUnderTest(
    kernel="CUDA kernel 'scale' of 'inline.cu'",
    make=_make,
    call_kwargs={"n": lambda shapes: shapes[0][0]},
    platform="gpu",
    compile_error=NvrtcCompileError,
    compile_error_bases=(TypeError, RuntimeError),
    dtypes_kernels="CUDA kernels",
    supported_dtypes=SUPPORTED_DTYPES,
    unsupported_dtype=jnp.int4,
    cache_env=CACHE_ENV,
    derivative_fix=FIX,
)

TestConformance = conformance_tests(CUDA_SOURCE)
