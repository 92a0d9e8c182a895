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
from ffi_core.cuda.testing import EmulatedGPU, emulate

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
FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` "
    "for reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)
KERNEL = "CUDA kernel 'scale' of 'inline.cu'"
JVP = f"{KERNEL} has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; {FIX}"
TRANSPOSE = f"{KERNEL} has no transpose rule, so jax.linear_transpose cannot transpose it; {FIX}"

X = jnp.arange(8, dtype=jnp.float32)
MODULE = load_cuda_inline(SCALE, kernels={"scale": ["in", "out", "n:int32"]})
OP = MODULE.kernel("scale", S(X.shape, X.dtype), grid=1, block=8)


def _op(x):
    return OP(x, n=8)


@pytest.fixture
def gpu():
    # Tracing only: nothing is lowered, so no handler is built against this driver.
    with emulate(EmulatedGPU()) as emulated:
        yield emulated


def test_grad_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.make_jaxpr(jax.grad(lambda x: _op(x).sum()))(X)


def test_jvp_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.make_jaxpr(lambda x: jax.jvp(_op, (x,), (x,)))(X)


def test_vjp_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(JVP)):
        jax.make_jaxpr(lambda x: jax.vjp(_op, x)[0])(X)


def test_linear_transpose_names_the_fix(gpu):
    with pytest.raises(NotImplementedError, match=re.escape(TRANSPOSE)):
        jax.make_jaxpr(lambda x: jax.linear_transpose(_op, x)(x))(X)


def test_dtype_messages():
    supported = ", ".join(ffi_core.SUPPORTED_DTYPES)
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
