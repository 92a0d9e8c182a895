"""What triton_kernel shares with every bridge: the dtype message, the
compile-error base, the vmap methods, and differentiation refused with a
message naming the kernel and the fix (at trace level, on the emulated GPU)."""

from __future__ import annotations

import re

import ffi_core
import jax
import jax.numpy as jnp
import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from ffi_core.bridge.cuda.testing import emulated_gpu_fixture  # noqa: E402
from ffi_core.testing import DIFFERENTIATION_TRANSFORMS, check_differentiation_refused  # noqa: E402
from triton_ffi import SUPPORTED_DTYPES, TritonCompileError, triton_kernel  # noqa: E402

S = jax.ShapeDtypeStruct


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, 2.0 * tl.load(x_ptr + i, mask=i < n), mask=i < n)


X = jnp.arange(8, dtype=jnp.float32)
OP = triton_kernel(scale, S(X.shape, X.dtype), grid=1, BLOCK=8)


def _op(x):
    return OP(x, n=8)


# Tracing only: nothing is lowered, so no handler is built against this driver.
gpu = emulated_gpu_fixture()


@pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
def test_differentiation_names_the_fix(gpu, transform):
    check_differentiation_refused(_op, X, kernel="triton kernel 'scale'", transform=transform)


def test_dtype_messages():
    supported = ", ".join(SUPPORTED_DTYPES)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`outs` entry 0 (ShapeDtypeStruct(shape=(8,), dtype=complex64)) has dtype "
            f"complex64, which Triton kernels do not take; supported: {supported}"
        ),
    ):
        triton_kernel(scale, S((8,), jnp.complex64), grid=1, BLOCK=8)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "input 0 of triton kernel 'scale' has dtype complex64, which Triton kernels do not "
            f"take; supported: {supported}"
        ),
    ):
        OP(np.zeros(8, np.complex64), n=8)


def test_shared_with_every_bridge():
    assert issubclass(TritonCompileError, ffi_core.KernelCompileError)
    assert issubclass(TritonCompileError, TypeError)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', "
            "'expand_dims', 'broadcast_all', got 'fold'"
        ),
    ):
        triton_kernel(scale, S((8,), jnp.float32), grid=1, vmap_method="fold", BLOCK=8)


SHARDED = triton_kernel(scale, S(X.shape, X.dtype), grid=1, sharding_rule="elementwise", BLOCK=8)


def test_linear_transpose_of_a_sharded_call_names_the_fix(gpu):
    # A call with a sharding rule goes through ffi_core's partitioned call;
    # transposing it runs the kernel's own rule, whose message names it.
    check_differentiation_refused(
        lambda x: SHARDED(x, n=lambda shapes: shapes[0][0]),
        X,
        kernel="triton kernel 'scale'",
        transform="linear_transpose",
    )


def test_op_is_named_after_the_kernel():
    assert (OP.__name__, OP.__qualname__, OP.__doc__) == (
        "scale",
        "scale",
        "triton kernel 'scale' as a JAX operation.",
    )
