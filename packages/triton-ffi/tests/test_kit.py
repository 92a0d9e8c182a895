"""What triton_kernel shares with every bridge: ffi-core's conformance suite
run over triton-ffi (names, compile error, vmap methods, dtype messages,
differentiation refused naming the kernel and the fix, the cache kept out of
the user's)."""

from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from ffi_core.testing import BridgeUnderTest, conformance_tests  # noqa: E402
from triton_ffi import SUPPORTED_DTYPES, TritonCompileError, triton_kernel  # noqa: E402
from triton_ffi._cache import CACHE_ENV  # noqa: E402


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, 2.0 * tl.load(x_ptr + i, mask=i < n), mask=i < n)


# The fix triton-ffi's refusal to differentiate names, stated whole.
FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for "
    "reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)


TRITON = BridgeUnderTest(
    kernel="triton kernel 'scale'",
    make=lambda outs, **options: triton_kernel(scale, outs, grid=1, BLOCK=8, **options),
    call_kwargs={"n": lambda shapes: shapes[0][0]},
    platform="gpu",
    compile_error=TritonCompileError,
    dtypes_kernels="Triton kernels",
    supported_dtypes=SUPPORTED_DTYPES,
    cache_env=CACHE_ENV,
    derivative_fix=FIX,
)

TestConformance = conformance_tests(TRITON)
