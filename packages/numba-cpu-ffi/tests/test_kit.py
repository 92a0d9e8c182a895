"""What numba_kernel shares with every bridge: ffi-core's conformance suite
run over numba-cpu-ffi (names, compile error, vmap methods, dtype messages,
differentiation refused naming the kernel and the fix, the cache kept out of
the user's)."""

from __future__ import annotations

import numba
from ffi_core.testing import BridgeUnderTest, conformance_tests
from numba_cpu_ffi import SUPPORTED_DTYPES, VMAP_METHODS, KernelCompileError, numba_kernel
from numba_cpu_ffi._cache import CACHE_ENV


@numba.njit
def scale(x, out):
    for i in range(x.size):
        out[i] = 2.0 * x[i]


# The fix numba-cpu-ffi's refusal to differentiate names, stated whole.
FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for "
    "reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)


NUMBA_CPU = BridgeUnderTest(
    kernel="numba kernel 'scale'",
    make=lambda outs, **options: numba_kernel(scale, outs, **options),
    compile_error=KernelCompileError,
    vmap_methods=VMAP_METHODS,
    dtypes_kernels="numba CPU kernels",
    supported_dtypes=SUPPORTED_DTYPES,
    unsupported_dtype="bfloat16",
    inputs_kernel="kernel 'scale'",
    cache_env=CACHE_ENV,
    derivative_fix=FIX,
)

TestConformance = conformance_tests(NUMBA_CPU)
