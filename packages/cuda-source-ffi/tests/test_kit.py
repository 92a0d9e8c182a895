"""What a CUDA-source kernel shares with every bridge: the dtype message, the
compile-error base, and differentiation refused with a message naming the
kernel and the fix (at trace level, on the emulated GPU)."""

from __future__ import annotations

import re

import ffi_core
import jax
import jax.numpy as jnp
import pytest
from cuda_source_ffi import NvrtcCompileError, load_cuda_inline
from cuda_source_ffi._nvrtc import _library
from ffi_core.bridge.cuda.testing import emulated_gpu_fixture
from ffi_core.testing import DIFFERENTIATION_TRANSFORMS, check_differentiation_refused

try:
    _library()
except ImportError as exc:  # pragma: no cover - NVRTC is in the workspace
    pytest.skip(str(exc), allow_module_level=True)

S = jax.ShapeDtypeStruct
SCALE = """
extern "C" __global__ void scale(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
"""
KERNEL = "CUDA kernel 'scale' of 'inline.cu'"

X = jnp.arange(8, dtype=jnp.float32)
MODULE = load_cuda_inline(SCALE, kernels={"scale": ["in", "out", "n:int32"]})
OP = MODULE.kernel("scale", S(X.shape, X.dtype), grid=1, block=8)


def _op(x):
    return OP(x, n=8)


# Tracing only: nothing is lowered, so no handler is built against this driver.
gpu = emulated_gpu_fixture()


@pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
def test_differentiation_names_the_fix(gpu, transform):
    check_differentiation_refused(_op, X, kernel=KERNEL, transform=transform)


def test_dtype_messages():
    supported = ", ".join(ffi_core.abi.SUPPORTED_DTYPES)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`outs` entry 0 (ShapeDtypeStruct(shape=(8,), dtype=int4)) has dtype int4, which "
            f"CUDA kernels do not take; supported: {supported}"
        ),
    ):
        MODULE.kernel("scale", S((8,), jnp.int4), grid=1, block=8)
    with pytest.raises(
        TypeError,
        match=re.escape(
            f"input 0 of {KERNEL} has dtype int4, which CUDA kernels do not take; "
            f"supported: {supported}"
        ),
    ):
        OP(jnp.zeros(8, jnp.int4), n=8)


def test_compile_error_is_every_bridge_s():
    assert issubclass(NvrtcCompileError, ffi_core.KernelCompileError)
    assert issubclass(NvrtcCompileError, TypeError)
    assert issubclass(NvrtcCompileError, RuntimeError)


SHARDED = MODULE.kernel("scale", S(X.shape, X.dtype), launch_dims=8, sharding_rule="elementwise")


def test_linear_transpose_of_a_sharded_call_names_the_fix(gpu):
    # A call with a sharding rule goes through ffi_core's partitioned call;
    # transposing it runs the kernel's own rule, whose message names it.
    check_differentiation_refused(
        lambda x: SHARDED(x, n=lambda shapes: shapes[0][0]),
        X,
        kernel=KERNEL,
        transform="linear_transpose",
    )


def test_op_is_named_after_the_kernel():
    assert (OP.__name__, OP.__doc__) == ("scale", f"{KERNEL} as a JAX operation.")
